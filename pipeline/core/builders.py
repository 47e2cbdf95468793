"""What the dataset builders of this project share beyond export.

``datasets`` wraps any error raised while generating examples in a ``DatasetGenerationError``
whose message is only "An error occurred while generating the dataset". Our builders raise
errors that say what is wrong and how to fix it; :class:`ClearErrors` lets those reach the user
unwrapped. The half-written cache folder has already been removed by then.
"""

from __future__ import annotations

from datasets.exceptions import DatasetGenerationError
from datasets.utils.info_utils import VerificationMode


class ClearErrors:
    """Mixin for a ``datasets`` builder: re-raise our own errors instead of the generic wrapper.

    It also records the verification mode as ``self.verify`` (False only for ``no_checks``) for
    builders that verify checksums while reading.
    """

    CLEAR_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError)
    verify: bool = True

    def download_and_prepare(self, *args, **kwargs):
        try:
            return super().download_and_prepare(*args, **kwargs)
        except DatasetGenerationError as e:
            cause = e.__cause__
            if isinstance(cause, self.CLEAR_ERRORS) and not isinstance(cause, DatasetGenerationError):
                raise cause.with_traceback(cause.__traceback__) from None
            raise

    def _download_and_prepare(self, dl_manager, verification_mode, **kwargs):
        self.verify = VerificationMode(verification_mode) != VerificationMode.NO_CHECKS
        return super()._download_and_prepare(dl_manager, verification_mode, **kwargs)
