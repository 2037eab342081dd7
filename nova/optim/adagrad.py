"""``torch.optim.adagrad``'s place: ``from nova.optim.adagrad import Adagrad`` (the
class lives with ``RMSprop`` in ``nova.optim.rmsprop``)."""
from nova.optim.rmsprop import Adagrad

__all__ = ["Adagrad"]
