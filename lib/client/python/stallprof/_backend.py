"""Chooses how this process reaches the ring: the C extension (fast) or the
ctypes fallback; records which one in the lane flags (`client` config)."""
import os

CLIENT_CEXT = 1
CLIENT_CTYPES = 2

ext = None
client = "none"


def _load():
    global ext, client
    if os.environ.get("STALLPROF_FORCE_CTYPES") != "1":
        try:
            from . import _stallprof as loaded
            loaded.set_client_kind(CLIENT_CEXT)
            ext, client = loaded, "cext"
            return
        except ImportError:
            pass
    if os.environ.get("STALLPROF_CLIENT_LIB"):
        try:
            from . import _ctypes_client as loaded
            loaded.set_client_kind(CLIENT_CTYPES)
            ext, client = loaded, "ctypes"
        except (ImportError, OSError, AttributeError):
            pass


_load()
