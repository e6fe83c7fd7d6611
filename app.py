"""The dashboard served as an ASGI app (st.App): `make run` and `make serve` start this, through launch.py.

`streamlit run dashboard.py` serves the same pages with Streamlit's own server, which takes no middleware. This one
adds views/page_base_url.py's: a page opened by its link (every page but Attention) connects 0.1 s sooner.
`streamlit run app.py` starts it without launch.py's warm-up.
"""

from __future__ import annotations

import streamlit as st
from starlette.middleware import Middleware

from views.page_base_url import PageBaseUrlMiddleware

app = st.App("dashboard.py", middleware=[Middleware(PageBaseUrlMiddleware)])
