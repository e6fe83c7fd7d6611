"""The dashboard served as an ASGI app (st.App): `make run` and `make serve` start this, through launch.py.

`streamlit run dashboard.py` serves the same pages with Streamlit's own server, which takes no middleware. This one
adds views/page_base_url.py's: a page opened by its link (every page but Attention) connects 0.1 s sooner; and
views/first_page_redirect.py's: a link to `/attention` opens the Attention page at the root, without a "Page not
found" dialog.
`streamlit run app.py` starts it without launch.py's warm-up.
"""

from __future__ import annotations

import streamlit as st
from starlette.middleware import Middleware

from views.first_page_redirect import FirstPageRedirectMiddleware
from views.page_base_url import PageBaseUrlMiddleware

FIRST_PAGE = "attention"  # dashboard.py's default page (views/attention.py), which Streamlit serves at the root
app = st.App(
    "dashboard.py",
    middleware=[Middleware(FirstPageRedirectMiddleware, first_page=FIRST_PAGE), Middleware(PageBaseUrlMiddleware)],
)
