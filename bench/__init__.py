"""fedspread's benchmarks (`make bench`, `make bench-quick`): each module measures one claim."""
