"""How checkpoint values become bytes, and which classes may come back.

The default, :class:`JsonSerializer`, writes typed JSON and rebuilds only
classes on its allowlist (:class:`TypeRegistry`): those named by handler
annotations plus those registered with ``WorkflowBuilder.register_type``.
Stored data can never make treadle import, evaluate or unpickle anything.
:class:`PickleSerializer` exists for those who opt in knowingly.
"""

from treadle._public import publish
from treadle._values._registry import TypeRegistry
from treadle._values._serialization import JsonSerializer, PickleSerializer, Serializer

__all__ = ["JsonSerializer", "PickleSerializer", "Serializer", "TypeRegistry"]

publish(__name__, globals(), __all__)
