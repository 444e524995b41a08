"""agentwrap: supervise terminal coding agents and deliver context into them.

The public API is small: profiles (how to read an agent), the detector (what
state it is in), the backends (how to drive its terminal) and the message
store (what to deliver). The ``agentwrap`` command is built on these.
"""

from .detect.states import Reading, State
from .errors import AgentwrapError

__all__ = ["AgentwrapError", "Reading", "State", "__version__"]
__version__ = "0.1.0"
