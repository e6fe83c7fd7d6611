"""What heads do page: remove heads and see the output change, each layer's guess, each head's share."""

import streamlit as st

st.header("What heads do")
