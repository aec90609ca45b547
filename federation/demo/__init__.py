"""`fedspread demo`: the whole federation on one machine, and the story of one workload on it."""
