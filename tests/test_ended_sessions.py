"""A session Streamlit has forgotten must not keep its download buttons' data alive (views/ended_sessions.py): the
test uses Streamlit's own media file manager, so a Streamlit that keeps these references elsewhere fails it."""

from __future__ import annotations

import gc
import weakref
from unittest import mock

from streamlit.runtime import media_file_manager
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

from views.ended_sessions import release_ended_sessions


class Held:
    """Stands for a trace that a download callable holds."""


class Sessions:
    """The part of Streamlit's session manager release_ended_sessions asks: whether it still knows a session."""

    def __init__(self, known: set[str]):
        self.known = known

    def get_session_info(self, session_id: str):
        return object() if session_id in self.known else None


class Runtime:
    def __init__(self, known: set[str]):
        self._session_mgr = Sessions(known)
        self.media_file_mgr = MediaFileManager(MemoryMediaFileStorage("/media"))


def add_download(runtime: Runtime, session_id: str) -> weakref.ref:
    """A deferred download of `session_id` whose callable holds a Held; a weak reference to that Held."""
    held = Held()
    with mock.patch.object(media_file_manager, "_get_session_id", return_value=session_id):
        runtime.media_file_mgr.add_deferred(lambda: repr(held).encode(), "text/plain", "view.txt", "coords-1")
    return weakref.ref(held)


def test_the_downloads_of_a_forgotten_session_let_go_and_a_known_sessions_stay():
    runtime = Runtime(known={"open tab"})
    kept, released = add_download(runtime, "open tab"), add_download(runtime, "closed tab")
    assert release_ended_sessions(runtime) == ["closed tab"]
    gc.collect()
    assert released() is None, "the closed tab's callable still holds its data"
    assert kept() is not None, "a session Streamlit still serves lost its download"
    assert release_ended_sessions(runtime) == []  # nothing left to release


def test_a_streamlit_that_keeps_sessions_elsewhere_leaves_everything_as_it_was(caplog):
    runtime = Runtime(known=set())
    held = add_download(runtime, "closed tab")
    del runtime._session_mgr  # no session manager where this Streamlit keeps it
    assert release_ended_sessions(runtime) == []
    gc.collect()
    assert held() is not None
    assert "cannot release" in caplog.text
