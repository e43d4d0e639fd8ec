"""ACLs and SCRAM credentials against a real single node (`epochlog up`, combined mode) with the standard
authorizer and `super.users=User:ANONYMOUS` (plaintext connections are ANONYMOUS): confluent-kafka's and
kafka-python's admin clients, the `epochlog acls` / `epochlog scram` / `epochlog storage format
--add-scram` CLIs, a restart (with metadata snapshots taken every few records), and a node without an
authorizer answering SECURITY_DISABLED."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.broker_process import BrokerProcess

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    # A snapshot every few records, so the restart below reloads ACLs and credentials from one.
    "metadata.log.max.record.bytes.between.snapshots": "2000",
    # and small segments, so the log is trimmed and the restarted broker loads that snapshot too.
    "metadata.log.segment.min.bytes": "1024",
    "metadata.log.segment.bytes": "4096",
}
ANY_ACL = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)
TIMEOUT = 15


def epochlog(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "epochlog.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("acls") / "data"
    out = epochlog(
        "storage", "format", "--data-dir", str(data), "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"
    )
    assert "admin-secret" not in out.stdout + out.stderr
    b = BrokerProcess(data, settings=AUTHORIZER).start()
    yield b
    b.stop()


def admin(node: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def acls_now(node: BrokerProcess, flt: AclBindingFilter = ANY_ACL) -> set[AclBinding]:
    a = admin(node)  # kept until the answer: a collected client cancels its requests
    return set(a.describe_acls(flt, request_timeout=TIMEOUT).result())


def credentials(node: BrokerProcess) -> dict[str, dict[str, int]]:
    a = admin(node)
    described = a.describe_user_scram_credentials(request_timeout=TIMEOUT).result()
    return {
        user: {str(c.mechanism.name): c.iterations for c in d.scram_credential_infos} for user, d in described.items()
    }


def test_formatted_credential_is_there_from_the_first_start(node: BrokerProcess) -> None:
    assert credentials(node)["admin"] == {"SCRAM_SHA_512": 4096}
    assert "admin-secret" not in (node.data_dir / "bootstrap-records.json").read_text()


def test_confluent_create_describe_delete(node: BrokerProcess) -> None:
    a = admin(node)
    read = AclBinding(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    write = AclBinding(
        ResourceType.TOPIC,
        "ord",
        ResourcePatternType.PREFIXED,
        "User:bob",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    group = AclBinding(
        ResourceType.GROUP,
        "g1",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.DENY,
    )
    for f in a.create_acls([read, write, group], request_timeout=TIMEOUT).values():
        assert f.result() is None
    assert a.create_acls([read], request_timeout=TIMEOUT)[read].result() is None
    assert acls_now(node) == {read, write, group}  # the repeated binding was not stored twice
    match = AclBindingFilter(
        ResourceType.TOPIC, "orders", ResourcePatternType.MATCH, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert acls_now(node, match) == {read, write}
    by_bob = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY, AclPermissionType.ANY
    )
    deleted = a.delete_acls([by_bob, match], request_timeout=TIMEOUT)
    assert set(deleted[by_bob].result()) == {write}
    assert set(deleted[match].result()) == {read, write}
    assert acls_now(node) == {group}  # answered once this broker's image shows it
    deleted = a.delete_acls([ANY_ACL], request_timeout=TIMEOUT)
    assert set(deleted[ANY_ACL].result()) == {group}
    assert acls_now(node) == set()


def test_invalid_creation_is_refused_per_binding(node: BrokerProcess) -> None:
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
    )
    from kafka.admin import ResourceType as KpResourceType

    ka = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        bad_cluster = ACL(
            "User:alice",
            "*",
            ACLOperation.ALTER,
            ACLPermissionType.ALLOW,
            ResourcePattern(KpResourceType.CLUSTER, "not-the-cluster", ACLResourcePatternType.LITERAL),
        )
        good = ACL(
            "User:alice",
            "*",
            ACLOperation.ALTER,
            ACLPermissionType.ALLOW,
            ResourcePattern(KpResourceType.CLUSTER, "kafka-cluster", ACLResourcePatternType.LITERAL),
        )
        result = ka.create_acls([bad_cluster, good])
        assert result["succeeded"] == [good]
        assert [e.__name__ for e in result["failed"]] == ["InvalidRequestError"]
    finally:
        ka.close()
    a = admin(node)
    a.delete_acls([ANY_ACL], request_timeout=TIMEOUT)[ANY_ACL].result()


def test_kafka_python_create_describe_delete(node: BrokerProcess) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType

    ka = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        acl = ACL(
            "User:carol",
            "*",
            ACLOperation.DESCRIBE,
            ACLPermissionType.ALLOW,
            ResourcePattern(KpResourceType.TRANSACTIONAL_ID, "tx-", ACLResourcePatternType.PREFIXED),
        )
        result = ka.create_acls([acl])
        assert result["succeeded"] == [acl] and not result["failed"]
        flt = ACLFilter(
            "User:carol",
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        found, error = ka.describe_acls(flt)
        assert error.errno == 0 and found == [acl]
        ((_f, matched, error),) = ka.delete_acls([flt])
        assert error.errno == 0 and matched == [acl]
        assert ka.describe_acls(flt)[0] == []
    finally:
        ka.close()


def test_scram_credentials_with_confluent(node: BrokerProcess) -> None:
    a = admin(node)
    up = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"alice-secret")
    up256 = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret")
    for f in a.alter_user_scram_credentials([up, up256], request_timeout=TIMEOUT).values():
        assert f.result() is None
    assert credentials(node)["alice"] == {"SCRAM_SHA_512": 8192}
    assert credentials(node)["bob"] == {"SCRAM_SHA_256": 4096}
    few = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 100), b"x")
    missing = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)
    futures = a.alter_user_scram_credentials([few, missing], request_timeout=TIMEOUT)
    for user, code in (("carol", "UNACCEPTABLE_CREDENTIAL"), ("dave", "RESOURCE_NOT_FOUND")):
        with pytest.raises(KafkaException) as e:
            futures[user].result()
        assert e.value.args[0].name() == code
    futures = a.describe_user_scram_credentials(["alice", "nobody"], request_timeout=TIMEOUT)
    assert futures["alice"].result().scram_credential_infos[0].iterations == 8192
    with pytest.raises(KafkaException) as e:
        futures["nobody"].result()
    assert e.value.args[0].name() == "RESOURCE_NOT_FOUND"
    gone = UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)
    a.alter_user_scram_credentials([gone], request_timeout=TIMEOUT)["bob"].result()
    assert "bob" not in credentials(node)


def test_cli_acls_and_scram(node: BrokerProcess) -> None:
    bs = node.bootstrap
    out = epochlog(
        "acls",
        "--bootstrap-server",
        bs,
        "--add",
        "--allow-principal",
        "User:erin",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        "payments",
        "--group",
        "billing",
    ).stdout
    assert "name=payments" in out and "operation=READ" in out
    epochlog(
        "acls", "--bootstrap-server", bs, "--add", "--allow-principal", "User:erin", "--producer", "--topic", "pay"
    )
    listed = epochlog("acls", "--bootstrap-server", bs, "--list", "--topic", "payments").stdout
    assert "User:erin" in listed and "operation=DESCRIBE" in listed and "operation=WRITE" not in listed
    listed = epochlog("acls", "--bootstrap-server", bs, "--list").stdout
    assert listed.count("principal=User:erin") == 2 + 2 + 3  # payments, billing, the producer's three on pay
    removed = epochlog("acls", "--bootstrap-server", bs, "--remove", "--topic", "payments", "--force").stdout
    assert removed.count("Removed ACL") == 2
    assert "name=payments" not in epochlog("acls", "--bootstrap-server", bs, "--list").stdout
    refused = epochlog(
        "acls", "--bootstrap-server", bs, "--add", "--allow-principal", "erin", "--topic", "t", check=False
    )
    assert refused.returncode != 0 and "Type:name" in refused.stderr
    assert epochlog("acls", "--bootstrap-server", bs, "--remove", "--topic", "pay", "--group", "billing", "--force")

    epochlog(
        "scram",
        "--bootstrap-server",
        bs,
        "--alter",
        "--entity-name",
        "frank",
        "--add-config",
        "SCRAM-SHA-512=[iterations=8192,password=frank-secret],SCRAM-SHA-256=[password=frank-secret]",
    )
    out = epochlog("scram", "--bootstrap-server", bs, "--describe", "--entity-name", "frank").stdout
    assert "SCRAM-SHA-256=iterations=4096" in out and "SCRAM-SHA-512=iterations=8192" in out
    epochlog("scram", "--bootstrap-server", bs, "--alter", "--entity-name", "frank", "--delete-config", "SCRAM-SHA-256")
    out = epochlog("scram", "--bootstrap-server", bs, "--describe").stdout
    assert "'frank' are SCRAM-SHA-512=iterations=8192" in out and "'admin'" in out
    bad = epochlog(
        "scram",
        "--bootstrap-server",
        bs,
        "--alter",
        "--entity-name",
        "frank",
        "--add-config",
        "SCRAM-SHA-512=[iterations=99,password=frank-secret]",
        check=False,
    )
    assert bad.returncode == 1 and "UNACCEPTABLE_CREDENTIAL" in bad.stderr and "frank-secret" not in bad.stderr


def test_acls_and_credentials_survive_a_restart(node: BrokerProcess) -> None:
    a = admin(node)
    keep = AclBinding(
        ResourceType.TOPIC,
        "kept",
        ResourcePatternType.LITERAL,
        "User:gina",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    a.create_acls([keep], request_timeout=TIMEOUT)[keep].result()
    up = UserScramCredentialUpsertion("gina", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 5000), b"gina-secret")
    a.alter_user_scram_credentials([up], request_timeout=TIMEOUT)["gina"].result()
    # Enough records after those for a snapshot to hold them (and the log before it to be trimmed).
    more = [
        AclBinding(
            ResourceType.GROUP,
            f"g{i}",
            ResourcePatternType.LITERAL,
            "User:gina",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        for i in range(30)
    ]
    for f in a.create_acls(more, request_timeout=TIMEOUT).values():
        f.result()
    before_acls, before_creds = acls_now(node), credentials(node)
    node.restart()
    assert acls_now(node) == before_acls and keep in before_acls and len(before_acls) == 31
    assert credentials(node) == before_creds
    assert before_creds["gina"] == {"SCRAM_SHA_256": 5000} and before_creds["admin"] == {"SCRAM_SHA_512": 4096}
    assert "wrote metadata snapshot" in node.log_text()
    assert "loaded metadata snapshot" in node.log_text()
    assert node.log_text().count("appending 1 bootstrap records") == 1  # once, not again after the restart


def test_without_an_authorizer_acl_apis_answer_security_disabled(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "plain").start()
    try:
        from kafka.admin import (
            ACLFilter,
            ACLOperation,
            ACLPermissionType,
            ACLResourcePatternType,
            KafkaAdminClient,
            ResourcePatternFilter,
        )
        from kafka.admin import ResourceType as KpResourceType
        from kafka.errors import SecurityDisabledError

        # confluent-kafka's describe_acls drops the top-level error of the answer (an empty list); kafka-python
        # raises it.
        ka = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=TIMEOUT * 1000)
        try:
            any_acl = ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY)
            with pytest.raises(SecurityDisabledError):
                ka.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, any_acl))
        finally:
            ka.close()
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        acl = AclBinding(
            ResourceType.TOPIC,
            "t",
            ResourcePatternType.LITERAL,
            "User:x",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        with pytest.raises(KafkaException) as e:
            a.create_acls([acl], request_timeout=TIMEOUT)[acl].result()
        assert e.value.args[0].name() == "SECURITY_DISABLED"
        with pytest.raises(KafkaException) as e:
            a.delete_acls([ANY_ACL], request_timeout=TIMEOUT)[ANY_ACL].result()
        assert e.value.args[0].name() == "SECURITY_DISABLED"
        # Credentials need no authorizer.
        up = UserScramCredentialUpsertion("h", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")
        a.alter_user_scram_credentials([up], request_timeout=TIMEOUT)["h"].result()
    finally:
        b.stop()


def test_scram_login_with_formatted_and_altered_credentials(tmp_path: Path) -> None:
    """The credentials the metadata log holds are the ones a SASL/SCRAM listener checks: the formatted
    admin from the first start, a user added with AlterUserScramCredentials at once, a wrong password
    refused; and the CLIs authenticate through --command-config."""
    from tests.broker_process import free_port

    data = tmp_path / "sasl"
    epochlog(
        "storage", "format", "--data-dir", str(data), "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"
    )
    port = free_port()
    settings = {
        **AUTHORIZER,
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "super.users": "User:admin;User:ANONYMOUS",
    }
    b = BrokerProcess(data, settings=settings).start()
    try:

        def client(user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> AdminClient:
            return AdminClient(
                {
                    "bootstrap.servers": f"127.0.0.1:{port}",
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": mechanism,
                    "sasl.username": user,
                    "sasl.password": password,
                }
            )

        a = client("admin", "admin-secret")
        up = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-pw")
        a.alter_user_scram_credentials([up], request_timeout=TIMEOUT)["alice"].result()
        assert client("alice", "alice-pw", "SCRAM-SHA-256").list_topics(timeout=TIMEOUT).brokers
        with pytest.raises(KafkaException):
            client("alice", "wrong", "SCRAM-SHA-256").list_topics(timeout=2)
        config = tmp_path / "admin.properties"
        config.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="admin" password="admin-secret";\n'
        )
        bs = f"127.0.0.1:{port}"
        out = epochlog("scram", "--bootstrap-server", bs, "--command-config", str(config), "--describe").stdout
        assert "'admin' are SCRAM-SHA-512=iterations=4096" in out and "'alice' are SCRAM-SHA-256" in out
        epochlog(
            "acls",
            "--bootstrap-server",
            bs,
            "--command-config",
            str(config),
            "--add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--topic",
            "t",
        )
        listed = epochlog("acls", "--bootstrap-server", bs, "--command-config", str(config), "--list").stdout
        assert "principal=User:alice" in listed
        _groups_cli_through_command_config(bs, config)
    finally:
        b.stop()


def _groups_cli_through_command_config(bs: str, config: Path) -> None:
    """`epochlog groups` and `share-groups` connect as the --command-config file says: a KIP-848 group is
    described (its admin calls and ConsumerGroupDescribe over the wire both log in); without the file the
    same commands cannot reach the SASL listener."""
    import time

    from confluent_kafka import Consumer
    from confluent_kafka.admin import NewTopic

    sasl = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": "admin-secret",
    }
    admin = AdminClient({"bootstrap.servers": bs, **sasl})
    admin.create_topics([NewTopic("grouped", 2, 1)])["grouped"].result(TIMEOUT)
    c = Consumer({"bootstrap.servers": bs, "group.id": "g848", "group.protocol": "consumer", **sasl})
    try:
        c.subscribe(["grouped"])
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment(), "the KIP-848 member got no assignment"
        out = epochlog(
            "groups", "--bootstrap-server", bs, "--command-config", str(config), "--describe", "--group", "g848",
            "--members", "--verbose",
        ).stdout  # fmt: skip
        # Member epochs come from ConsumerGroupDescribe, sent over the wire connection, not the AdminClient.
        assert "g848" in out and "CURRENT-EPOCH" in out and "grouped(0,1)" in out, out
        listed = epochlog("share-groups", "--bootstrap-server", bs, "--command-config", str(config), "--list")
        assert listed.returncode == 0
        cut = epochlog("groups", "--bootstrap-server", bs, "--list", "--timeout", "2000", check=False)
        assert cut.returncode != 0 and "g848" not in cut.stdout, (cut.stdout, cut.stderr)
        bad = tmp_bad_config(config)
        refused = epochlog("groups", "--bootstrap-server", bs, "--command-config", str(bad), "--list", check=False)
        assert refused.returncode == 2 and "--command-config" in refused.stderr, refused.stderr
    finally:
        c.close()


def tmp_bad_config(config: Path) -> Path:
    bad = config.with_name("bad.properties")
    bad.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    return bad
