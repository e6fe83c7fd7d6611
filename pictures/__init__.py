"""The pictures: arrays and DataFrames in, matrix-view boards or Plotly figures out; no streamlit.

Every line, bar and curve chart is a plotly Figure, the same for a page and for a notebook
(pictures.notebook_figures). The app's matrices are matrix-view boards (pictures/boards.py says why).
"""
