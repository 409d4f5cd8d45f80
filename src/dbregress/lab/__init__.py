"""The lab: the lab file read into a Lab (file), its columns and builds (columns), its
compile flavors (flavors), its benchmark sizes (sizes) and the microbenchmarks' names
(micro_names)."""
