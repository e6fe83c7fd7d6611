"""Small Streamlit pieces the pages share."""

from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st


def csv_button(label: str, frame: pd.DataFrame, file_name: str, key: str) -> None:
    """A download button for a table as CSV, built only when clicked."""
    st.download_button(
        label,
        data=partial(frame.to_csv, index=False),
        file_name=file_name,
        mime="text/csv",
        on_click="ignore",
        icon=":material/download:",
        key=key,
    )
