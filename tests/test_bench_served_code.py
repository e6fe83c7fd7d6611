"""bench/serve.py: a server whose code changes while it runs is reported, since what it served mixed two versions."""

from __future__ import annotations

import os
from pathlib import Path

from bench.serve import changed_code, served_code, serving


def make_tree(root: Path) -> None:
    for path in ("app.py", "dashboard.py", "views/page.py", "views/matrix_view.js", "explorer/model.py",
                 ".streamlit/config.toml", "tests/test_page.py", "bench/bench_x.py", ".venv/lib/site.py",
                 "views/__pycache__/page.cpython-311.pyc"):  # fmt: skip
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x = 1\n")


def test_the_served_code_is_the_top_level_scripts_and_the_app_folders(tmp_path):
    make_tree(tmp_path)
    served = [".streamlit/config.toml", "app.py", "dashboard.py", "explorer/model.py", "views/matrix_view.js"]
    assert sorted(served_code(tmp_path)) == [*served, "views/page.py"]


def test_an_edited_an_added_and_a_removed_file_are_each_named_and_nothing_else(tmp_path):
    make_tree(tmp_path)
    before = served_code(tmp_path)
    assert changed_code(before, served_code(tmp_path)) == []  # looked at twice, unchanged
    page = tmp_path / "views/page.py"
    later = before["views/page.py"][0] + 10**9
    os.utime(page, ns=(later, later))  # saved again a second later, the same bytes
    (tmp_path / "pictures").mkdir()
    (tmp_path / "pictures/new.py").write_text("y = 2\n")
    (tmp_path / "explorer/model.py").unlink()
    (tmp_path / "tests/test_page.py").write_text("z = 3\n")  # not served: not named
    assert changed_code(before, served_code(tmp_path)) == ["explorer/model.py", "pictures/new.py", "views/page.py"]


def test_serving_says_when_its_code_changed_while_it_ran_and_is_silent_otherwise(tmp_path, capfd):
    (tmp_path / "app.py").write_text("import streamlit as st\n\nst.write('one')\n")
    with serving("app.py", root=tmp_path):
        pass
    assert "WARNING" not in capfd.readouterr().err
    with serving("app.py", root=tmp_path):
        (tmp_path / "app.py").write_text("import streamlit as st\n\nst.write('two lines')\n")  # at once, longer
    assert f"WARNING: app.py changed in {tmp_path} while its server ran" in capfd.readouterr().err
