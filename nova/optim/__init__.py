"""``nv.optim``: optimizers whose ``step()`` realizes the whole training step.

``LBFGS`` is the exception: its ``step(closure)`` re-evaluates the closure inside a line
search and decides on the host from each loss. ``SparseAdam`` finds the rows a sparse
gradient would hold from the dense gradient's values (``nova/optim/sparse_adam.py``).

The submodules have PyTorch's names (``nova.optim.adamw``, ``.adam``, ``.sgd``,
``.adagrad``, ``.lr_scheduler``, ``.swa_utils``, ``.optimizer``...), so ported imports
(``from torch.optim.adamw import AdamW``) keep working with the package renamed."""
from nova.optim import adagrad, adamw, lr_scheduler, optimizer, swa_utils
from nova.optim.adadelta import Adadelta
from nova.optim.adafactor import Adafactor
from nova.optim.adam import Adam, AdamW
from nova.optim.adamax import Adamax
from nova.optim.asgd import ASGD
from nova.optim.lbfgs import LBFGS
from nova.optim.muon import Muon
from nova.optim.nadam import NAdam
from nova.optim.optimizer import Optimizer
from nova.optim.radam import RAdam
from nova.optim.rmsprop import Adagrad, RMSprop
from nova.optim.rprop import Rprop
from nova.optim.sgd import SGD
from nova.optim.sparse_adam import SparseAdam

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "NAdam", "RAdam",
           "Adamax", "Adadelta", "Rprop", "ASGD", "LBFGS", "SparseAdam", "Adafactor",
           "Muon", "lr_scheduler", "swa_utils"]
