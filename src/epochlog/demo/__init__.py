"""`epochlog demo`: a 3-broker cluster, a live event stream, a Spark query into Parquet and a leader kill.

events.py generates the page views, run.py orchestrates the run and checks the result, report.py writes
the HTML report. The CLI command is in epochlog.cli.demo_cmd.
"""
