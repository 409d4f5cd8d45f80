"""Reports: renderers over the analysis Matrix; each a sibling with one render()."""
