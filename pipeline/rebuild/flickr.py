"""The Flickr client: REST API calls and image fetches, with a rate limit and retries.

Flickr's REST API (``flickr.photos.search``, JSON with ``nojsoncallback=1``) is called with
POST, so that the API key travels in the request body: it never appears in a URL, a log line
or an error message (:func:`redact` removes it from anything quoted back). Answers 429 and 5xx,
dropped connections and invalid JSON are retried with exponential backoff, waiting at least
what a ``Retry-After`` header asks; a rejected key (``stat: fail``, code 100) is one sentence.

This module is shared by ``search`` and ``download`` (and is not a stage itself).
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import threading
import time
from typing import Callable, Mapping, Optional

logger = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://api.flickr.com/services/rest/"
KEY_VARIABLE = "FLICKR_API_KEY"
INVALID_KEY_CODES = (100,)  # Flickr: "Invalid API Key"
RETRY_CODES = (10, 105)  # Flickr: search temporarily unavailable, service currently unavailable
MAX_WAIT_SECONDS = 600.0


class FlickrError(OSError):
    """Flickr (or the network) failed for good; the message names the request, never the key."""


class FlickrKeyError(ValueError):
    """The API key is missing or Flickr rejected it."""


def api_key_from_environment(environ: Mapping[str, str] = os.environ) -> str:
    """The key in ``FLICKR_API_KEY``, or :class:`FlickrKeyError` saying how to set it."""
    key = environ.get(KEY_VARIABLE, "").strip()
    if not key:
        raise FlickrKeyError(
            f"{KEY_VARIABLE} is not set: get a Flickr API key (https://www.flickr.com/services/api/misc.api_keys.html) "
            f"and export {KEY_VARIABLE}=<your key>"
        )
    return key


def redact(text: str, secret: Optional[str]) -> str:
    """``text`` with ``secret`` replaced by ``***``."""
    return text.replace(secret, "***") if secret else text


class RateLimiter:
    """At most ``per_second`` calls per second, across threads."""

    def __init__(self, per_second: Optional[float], clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.interval = 1.0 / per_second if per_second else 0.0
        self.clock, self.sleep = clock, sleep
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = self.clock()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            self.sleep(start - now)


def retry_after_seconds(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds a ``Retry-After`` header asks to wait (a number or an HTTP date), None if absent or unreadable.

    >>> retry_after_seconds("3"), retry_after_seconds(None), retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0)
    (3.0, None, 10.0)
    """
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


class Retrying:
    """Retries with exponential backoff (``backoff``, doubling), honouring ``Retry-After``."""

    def __init__(self, retries: int = 5, backoff: float = 1.0, limiter: Optional[RateLimiter] = None, sleep: Callable[[float], None] = time.sleep):
        self.retries, self.backoff, self.sleep = retries, backoff, sleep
        self.limiter = limiter or RateLimiter(None)

    def wait_before(self, attempt: int, retry_after: Optional[float]) -> None:
        delay = self.backoff * (2 ** attempt)
        if retry_after is not None:
            delay = max(delay, retry_after)
        self.sleep(min(delay, MAX_WAIT_SECONDS))

    def call(self, send: Callable[[], "object"], what: str, secret: Optional[str] = None):
        """``send()`` until it returns an answer that is not 429/5xx; return the answer (httpx.Response)."""
        import httpx

        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                logger.info("%s: %s; retry %d of %d", what, problem, attempt, self.retries)
            self.limiter.wait()
            try:
                response = send()
            except httpx.TransportError as e:
                problem = redact(f"{type(e).__name__}: {e}", secret)
                if attempt < self.retries:
                    self.wait_before(attempt, None)
                continue
            if response.status_code == 429 or response.status_code >= 500:
                problem = f"HTTP {response.status_code}"
                if attempt < self.retries:
                    self.wait_before(attempt, retry_after_seconds(response.headers.get("Retry-After")))
                continue
            return response
        raise FlickrError(f"{what}: gave up after {self.retries + 1} attempts ({problem})")


class FlickrClient:
    """Calls Flickr's REST API (POST, JSON) through one connection pool."""

    def __init__(self, api_key: str, endpoint: str = DEFAULT_ENDPOINT, *, requests_per_second: Optional[float] = 1.0,
                 retries: int = 5, backoff: float = 1.0, timeout: float = 30.0, sleep: Callable[[float], None] = time.sleep):
        import httpx

        self.api_key, self.endpoint = api_key, endpoint
        self.retrying = Retrying(retries, backoff, RateLimiter(requests_per_second, sleep=sleep), sleep)
        self.http = httpx.Client(timeout=timeout, follow_redirects=True, headers={"User-Agent": "imagenetv2-hf search"})

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, params: Mapping[str, object]) -> dict:
        """The JSON answer of ``method`` with ``params`` (``stat: ok``), retrying as the module says."""
        form = {"method": method, **{k: str(v) for k, v in params.items()}, "format": "json", "nojsoncallback": "1", "api_key": self.api_key}
        what = f"Flickr {method} ({_describe(params)})"
        problem = ""
        for attempt in range(self.retrying.retries + 1):
            response = self.retrying.call(lambda: self.http.post(self.endpoint, data=form), what, self.api_key)
            answer, problem = _answer(response, self.api_key)
            if answer is not None:
                return answer
            if attempt < self.retrying.retries:
                self.retrying.wait_before(attempt, None)
        raise FlickrError(f"{what}: gave up after {self.retrying.retries + 1} attempts ({problem})")


def _describe(params: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={params[k]}" for k in ("text", "page") if k in params)


def _answer(response, secret: str) -> tuple[Optional[dict], str]:
    """(the answer, "") for ``stat: ok``; (None, problem) for a retryable one; raises for a final failure."""
    if response.status_code >= 400:
        raise FlickrError(f"Flickr answered HTTP {response.status_code} at {response.request.url}")
    try:
        answer = json.loads(response.content)
    except ValueError:
        return None, "the answer is not valid JSON"
    if not isinstance(answer, dict):
        return None, "the answer is not a JSON object"
    if answer.get("stat") == "ok":
        return answer, ""
    code, message = answer.get("code"), redact(str(answer.get("message", "")), secret)
    if code in INVALID_KEY_CODES:
        raise FlickrKeyError(f"Flickr rejected the API key in {KEY_VARIABLE} ({message or 'invalid key'}); set {KEY_VARIABLE} to a valid key")
    if code in RETRY_CODES:
        return None, f"Flickr error {code}: {message}"
    raise FlickrError(f"Flickr error {code}: {message}")
