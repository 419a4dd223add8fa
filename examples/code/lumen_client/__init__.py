"""A small example client for the (imaginary) Lumen workspace analytics API."""

from .client import LumenClient, LumenError
from .keys import RotatedKey, rotate_key
from .webhooks import SignatureError, sign, verify_signature

__all__ = ["LumenClient", "LumenError", "RotatedKey", "rotate_key", "SignatureError", "sign", "verify_signature"]
