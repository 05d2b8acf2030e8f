"""Authentication as Kafka has it: SASL mechanisms (PLAIN, SCRAM-SHA-256/512), the SCRAM credentials kept in the
store and managed through KIP-554's admin APIs, and TLS listeners with certificate principals."""
