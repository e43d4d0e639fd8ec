"""Multi-broker mode: the controller process, brokers that follow its metadata log, and replica fetchers."""
