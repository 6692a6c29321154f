"""A cluster with the ACL authorizer, as the interop tests of authorization start it: the
brokers (and the tests' own kcore clients) on a PLAINTEXT listener as super users, and users
admin and alice on a SASL/PLAIN one."""

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_alice="alice-secret";'
)
SECURED = {
    # The brokers' (and the test's kcore Admin's) listener first; alice's a SASL one.
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",  # whoever reaches the PLAINTEXT listener: brokers
}
