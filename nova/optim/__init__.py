"""``nv.optim``: optimizers whose ``step()`` realizes the whole training step."""
from nova.optim import lr_scheduler
from nova.optim.adam import Adam, AdamW
from nova.optim.optimizer import Optimizer
from nova.optim.rmsprop import Adagrad, RMSprop
from nova.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]
