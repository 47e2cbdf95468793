"""Publish a Hub-ready dataset folder as a new, tagged revision of a Hub dataset repository.

A push has three steps, each a function you can call on its own:

1. :func:`check_folder` -- the folder loads with ``datasets``, every config of the card has
   data, and its row counts and features are what the card's ``dataset_info`` says;
2. :func:`plan_push` -- read the Hub (nothing is written): the target repo, branch and tag,
   the previous tag, the files to upload and delete, and what changed against the previous tag;
3. :func:`execute_push` -- create the repo if needed, upload everything in **one commit**
   (additions plus deletions of files no longer in the folder, so the branch moves from the
   previous revision to the new one at once, or not at all), then tag that exact commit.

The card that is uploaded records the revision (the user's folder is never modified: the new
``README.md`` and ``revisions/changes.json`` are uploaded from memory, the data files straight
from the folder). In the card's YAML::

    revision:
      name: v2                      # the tag
      previous: v1                  # the previous tag of the branch, or null
      configs:
        matched-frequency:
          revision_file: imagenetv2-b-33.json   # from revisions/<config>.json, if present
          rows: 10000
          compared_by: candidate_id
          images_added: 12
          images_removed: 12

plus a prose section, and ``revisions/changes.json`` lists the ids added and removed per config.

Images are identified by the column the dataset package names in the card's ``row_id:``
(``candidate_id`` for ImageNetV2, ``ti_index`` for CIFAR-10.1), else by the sha256 of the image
bytes. The *previous tag* is the most recent
tagged commit in the history of the target branch (of ``main`` for a new branch).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

from pipeline.publish.hub import PublishError
from pipeline.publish.names import DEFAULT_BRANCH, REPO_TYPE, human_size
from pipeline.publish.plan import PushPlan

logger = logging.getLogger(__name__)

# --- 4. the push -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PushResult:
    repo_id: str
    branch: str
    tag: str
    commit_oid: str
    url: str


class PushFailed(PublishError):
    """A Hub call failed during ``stage``; ``committed`` says whether the new commit exists."""

    def __init__(self, stage: str, cause: BaseException, *, committed: Optional[str] = None):
        super().__init__(f"{stage}: {cause}")
        self.stage, self.cause, self.committed = stage, cause, committed


def execute_push(api, plan: PushPlan, *, token=None) -> PushResult:
    """Create the repo (if needed) and the branch (if needed), commit every file at once, tag it.

    Raises :class:`PushFailed` naming the stage that failed. Until the commit call succeeds the
    target branch and every tag are exactly as before.
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    stage = "creating the repository"
    try:
        if not plan.repo_exists:
            api.create_repo(plan.repo_id, repo_type=REPO_TYPE, private=plan.private, exist_ok=True, token=token)
        elif plan.private:
            logger.warning("--private only applies to a new repository: %s keeps its current visibility", plan.repo_id)
        head = plan.head_oid
        if head is None:
            head = api.repo_info(plan.repo_id, repo_type=REPO_TYPE, revision=DEFAULT_BRANCH, token=token).sha
        if not plan.branch_exists and plan.branch != DEFAULT_BRANCH:
            stage = f"creating branch {plan.branch}"
            api.create_branch(plan.repo_id, repo_type=REPO_TYPE, branch=plan.branch, revision=head, exist_ok=True, token=token)
        operations = [CommitOperationAdd(f.path_in_repo, f.source if isinstance(f.source, bytes) else str(f.source)) for f in plan.files]
        operations += [CommitOperationDelete(path) for path in plan.deletions]
        stage = f"uploading {len(plan.files)} files and committing them to branch {plan.branch}"
        logger.info("committing %d files (%s) to %s@%s", len(plan.files), human_size(plan.upload_bytes), plan.repo_id, plan.branch)
        commit = api.create_commit(
            plan.repo_id,
            operations,
            commit_message=plan.message,
            commit_description=plan.record.prose(plan.repo_id),
            repo_type=REPO_TYPE,
            revision=plan.branch,
            parent_commit=head,
            token=token,
        )
    except Exception as e:
        raise PushFailed(stage, e) from e
    try:
        api.create_tag(
            plan.repo_id, repo_type=REPO_TYPE, tag=plan.tag, revision=commit.oid, tag_message=plan.message, token=token
        )
    except Exception as e:
        raise PushFailed(f"tagging commit {commit.oid[:12]} as {plan.tag}", e, committed=commit.oid) from e
    url = f"{plan.endpoint}/datasets/{plan.repo_id}/tree/{plan.tag}"
    return PushResult(plan.repo_id, plan.branch, plan.tag, commit.oid, url)
