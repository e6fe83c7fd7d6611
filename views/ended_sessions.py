"""Let go of what the download buttons of ended sessions hold: release_ended_sessions() after each page.

A download button built on click (views/widgets.py: download) leaves Streamlit's media file manager a callable,
and the callable holds what it needs to write its file: the tables of a CSV, and makers and keys for a trace
(views/state.py; before those, a page's trace itself, 628 MB for SmolLM2 at 512 pieces). Streamlit drops a
session's callables when the session shuts down. A session whose browser went away is kept for
server.disconnectedSessionTTL seconds, for a reconnect, and then forgotten without being shut down (streamlit
1.5x: runtime/memory_session_storage.py), so its callables, and what they hold, stayed for the server's life. This
asks Streamlit to forget the file references of every session it no longer knows, as its own shutdown would.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

LOG = logging.getLogger(__name__)


def release_ended_sessions(runtime: Any = None) -> list[str]:
    """Clear the media file references (download callables included) of the sessions `runtime` (default: this
    server's) neither serves nor keeps for a reconnect; the ids of those sessions. Does nothing, and says so in
    the log once, when this Streamlit keeps them elsewhere."""
    try:
        if runtime is None:
            from streamlit.runtime import Runtime

            if not Runtime.exists():
                return []
            runtime = Runtime.instance()
        sessions = runtime._session_mgr  # Streamlit has no public list of the sessions it keeps
        media = runtime.media_file_mgr
        with media._lock:
            referring = list(media._files_by_session_and_coord)  # the sessions that hold file references
        # the session storage is not safe across threads on its own: its manager's lock, where it has one
        with getattr(sessions, "_storage_lock", None) or contextlib.nullcontext():
            ended = [sid for sid in referring if sessions.get_session_info(sid) is None]
    except AttributeError as e:
        _say_once(f"cannot release the download files of ended sessions with this Streamlit ({e})")
        return []
    for session_id in ended:
        media.clear_session_refs(session_id)
    if ended:
        media.remove_orphaned_files()  # drops the callables no session refers to any more
    return ended


_said: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        LOG.warning(message)
