"""``nv.optim``: optimizers whose ``step()`` realizes the whole training step.

PyTorch's ``LBFGS`` (its ``step`` re-evaluates the closure many times inside a line
search, deciding on the host from each loss) and ``SparseAdam`` (sparse gradients) are
not provided."""
from nova.optim import lr_scheduler
from nova.optim.adadelta import Adadelta
from nova.optim.adam import Adam, AdamW
from nova.optim.adamax import Adamax
from nova.optim.asgd import ASGD
from nova.optim.nadam import NAdam
from nova.optim.optimizer import Optimizer
from nova.optim.radam import RAdam
from nova.optim.rmsprop import Adagrad, RMSprop
from nova.optim.rprop import Rprop
from nova.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "NAdam", "RAdam",
           "Adamax", "Adadelta", "Rprop", "ASGD", "lr_scheduler"]
