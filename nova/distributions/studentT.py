"""``torch.distributions.studentT``'s module name for ``StudentT`` (defined in
``student_t``), so ``from nova.distributions.studentT import StudentT`` ports."""
from nova.distributions.student_t import StudentT

__all__ = ["StudentT"]
