"""Scale-out on PostgreSQL: workers that lease runs, and the client that feeds them."""
