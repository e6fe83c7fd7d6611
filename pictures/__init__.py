"""The pictures: arrays and DataFrames in, matrix-view boards, Vega-Lite charts or Plotly figures out; no streamlit.

The notebook figures (pictures.notebook_figures) need plotly; the app's boards and charts do not import it.
"""
