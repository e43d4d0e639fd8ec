"""Listeners' security: TLS, SASL (PLAIN, SCRAM), principals and the ACL authorizer, with Kafka's
semantics and property names. The modules here decide; server/ carries their answers out."""
