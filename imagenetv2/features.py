"""The columns of an ImageNetV2 row."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .classes import class_names

if TYPE_CHECKING:
    import datasets

# Candidate metadata columns, from the Flickr search records (null where no record is known),
# and the search-record field each comes from.
METADATA_FIELDS = {
    "flickr_id": "id_search_engine",
    "url": "url",
    "date_taken": "date_taken",
    "date_uploaded": "date_upload_search_engine",
    "search_key": "search_key",
    "width": "width",
    "height": "height",
}


def imagenetv2_features() -> "datasets.Features":
    """Features of every ImageNetV2 config (and of rebuilt revisions)."""
    import datasets  # here, so that importing the column names stays cheap

    return datasets.Features(
        {
            "image": datasets.Image(),
            "label": datasets.ClassLabel(names=class_names()),
            "wnid": datasets.Value("string"),
            "candidate_id": datasets.Value("string"),
            "flickr_id": datasets.Value("string"),
            "url": datasets.Value("string"),
            "date_taken": datasets.Value("string"),
            "date_uploaded": datasets.Value("string"),
            "search_key": datasets.Value("string"),
            "width": datasets.Value("int32"),
            "height": datasets.Value("int32"),
        }
    )
