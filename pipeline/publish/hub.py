"""What both publishing commands share: credentials, names, and errors a person can act on.

The token comes the usual way (``HF_TOKEN``, or the token ``hf auth login`` stored, through
:func:`huggingface_hub.get_token`) and the endpoint follows ``HF_ENDPOINT``. A token is never
printed or logged: every message this module builds passes through :func:`redact`, and
:func:`redacting_logs` filters every log record while a command runs.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Iterator, Optional

logger = logging.getLogger(__name__)

TOKEN_HELP = (
    "set HF_TOKEN=<token> in the environment, or run `hf auth login` once (huggingface_hub "
    "stores the token and reads it from there); create a token with write access at "
    "https://huggingface.co/settings/tokens"
)
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
REF_NAME_RE = re.compile(r"^(?!refs/)(?!.*\.\.)(?!.*//)[A-Za-z0-9][A-Za-z0-9._/-]{0,127}(?<![./])$")
REDACTED = "hf_***"


class PublishError(Exception):
    """A push that cannot go on, with a message that says what is wrong and what to do."""


class CredentialsError(PublishError):
    """No token, or the Hub rejected it."""


def check_repo_id(repo_id: str) -> str:
    """Return ``repo_id`` if it is ``ORG/NAME``; raise ``ValueError`` saying what is allowed.

    >>> check_repo_id("my-org/imagenetv2")
    'my-org/imagenetv2'
    >>> check_repo_id("imagenetv2")
    Traceback (most recent call last):
    ValueError: repo id 'imagenetv2' is not of the form ORG/NAME (letters, digits, '.', '_', '-'); e.g. --repo-id my-org/imagenetv2
    """
    if not isinstance(repo_id, str) or not REPO_ID_RE.match(repo_id) or ".." in repo_id:
        raise ValueError(
            f"repo id {repo_id!r} is not of the form ORG/NAME (letters, digits, '.', '_', '-'); "
            "e.g. --repo-id my-org/imagenetv2"
        )
    return repo_id


def check_ref_name(name: str, what: str) -> str:
    """Return a tag or branch name if git and the Hub accept it; raise ``ValueError`` otherwise.

    >>> check_ref_name("v2", "tag")
    'v2'
    >>> check_ref_name("refs/tags/v2", "tag")
    Traceback (most recent call last):
    ValueError: tag name 'refs/tags/v2' is not allowed: use letters, digits, '.', '_', '-' and '/' (not at the ends, no '..', not starting with refs/), e.g. v2 or 2024-05-rebuild
    """
    if not isinstance(name, str) or not REF_NAME_RE.match(name):
        raise ValueError(
            f"{what} name {name!r} is not allowed: use letters, digits, '.', '_', '-' and '/' "
            "(not at the ends, no '..', not starting with refs/), e.g. v2 or 2024-05-rebuild"
        )
    return name


def get_token(required: bool = True) -> Optional[str]:
    """The token huggingface_hub would use (``HF_TOKEN``, then the one stored at login).

    Raises :class:`CredentialsError` when ``required`` and there is none.
    """
    import huggingface_hub

    token = huggingface_hub.get_token()
    if token is None and required:
        raise CredentialsError(f"no Hugging Face token found: {TOKEN_HELP}")
    return token


def endpoint() -> str:
    """The Hub endpoint in use (``HF_ENDPOINT``, default https://huggingface.co)."""
    from huggingface_hub import constants

    return constants.ENDPOINT


def redact(text: str, token: Optional[str]) -> str:
    """``text`` with every occurrence of ``token`` (and of any ``hf_...`` token) replaced.

    >>> redact("Bearer hf_abcdefghijklmnop failed", None)
    'Bearer hf_*** failed'
    """
    text = str(text)
    if token:
        text = text.replace(token, REDACTED)
    return re.sub(r"\bhf_[A-Za-z0-9_]{8,}", REDACTED, text)


class _RedactingFilter(logging.Filter):
    def __init__(self, token: Optional[str]):
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message, self.token)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info:
            import traceback

            record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)), self.token)
            record.exc_info = None
        return True


@contextlib.contextmanager
def redacting_logs(token: Optional[str]) -> Iterator[None]:
    """While the block runs, every handler of the root logger redacts ``token`` from records."""
    root = logging.getLogger()
    flt = _RedactingFilter(token)
    handlers = list(root.handlers)
    for handler in handlers:
        handler.addFilter(flt)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(flt)


def http_status(exc: BaseException) -> Optional[int]:
    """The HTTP status of a huggingface_hub error (or of its cause), if there is one."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int):
            return status
        exc = exc.__cause__ or exc.__context__
    return None


def _is_transport_error(exc: BaseException) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        module = type(exc).__module__ or ""
        if module.startswith(("httpx", "httpcore")) or isinstance(exc, (ConnectionError, TimeoutError)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _server_message(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if response is not None:
        message = response.headers.get("X-Error-Message")
        if message:
            return message
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def describe_failure(exc: BaseException, stage: str, *, token: Optional[str], safe_note: str = "") -> str:
    """A one-paragraph message for a failed Hub call during ``stage`` (token redacted).

    ``safe_note`` says what is still intact (for example "the previous revision is untouched").
    """
    status = http_status(exc)
    where = endpoint()
    if status == 401:
        text = (
            f"the Hub at {where} rejected the token while {stage} (401 Unauthorized: "
            f"{_server_message(exc)}). The token is invalid, expired or revoked: {TOKEN_HELP}."
        )
    elif status == 403:
        text = (
            f"the token may not do this at {where} while {stage} (403 Forbidden: {_server_message(exc)}). "
            "Use a token with write access to that namespace (https://huggingface.co/settings/tokens)."
        )
    elif status is not None:
        text = f"the Hub at {where} answered HTTP {status} while {stage}: {_server_message(exc)}."
    elif _is_transport_error(exc):
        text = f"the connection to the Hub at {where} failed while {stage} ({type(exc).__name__}: {exc})."
    else:
        cause = exc.__cause__
        detail = f"{exc}" + (f" ({type(cause).__name__}: {cause})" if cause is not None else "")
        text = f"{stage} failed: {type(exc).__name__}: {detail}."
    if safe_note:
        text += " " + safe_note
    return redact(text, token)


def quiet_http_logs(verbose: bool = False) -> None:
    """Keep the HTTP clients' one-line-per-request INFO logs out of a command's output (unless -v)."""
    if not verbose:
        for name in ("httpx", "httpx2", "httpcore"):
            logging.getLogger(name).setLevel(logging.WARNING)


def run_with_token(args, body) -> int:
    """Run a publishing command: get the token (required unless ``args.dry_run``), keep it out of
    every log record and message, and turn any unexpected error into a one-line message (exit 1).

    ``body(args, token) -> int`` is the command itself.
    """
    import sys
    import traceback

    verbose = getattr(args, "verbose", False)
    try:
        token = get_token(required=not args.dry_run)
    except PublishError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    quiet_http_logs(verbose)
    with redacting_logs(token):
        try:
            return body(args, token)
        except Exception as e:  # anything unexpected: a message, never a token
            print(f"error: {redact(f'{type(e).__name__}: {e}', token)}", file=sys.stderr, flush=True)
            if verbose:
                print(redact(traceback.format_exc(), token), file=sys.stderr, flush=True)
            return 1
