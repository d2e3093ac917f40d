"""One adapter per engine; see ../_workload.py for the interface they implement."""
