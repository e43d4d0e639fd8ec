"""Transactions (KIP-98): the coordinator's state machine and its ``__transaction_state`` records."""
