"""A single node with one listener of each security protocol, for the security tests.

PLAINTEXT (the --port listener), SASL_SSL and SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256/512, and SSL
requiring a client certificate. SCRAM users come from `epochlog storage format --add-scram`, run before
the first start as kafka-storage.sh is; PLAIN users from the listener's JAAS config."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.broker_process import BrokerProcess, free_port
from tests.pki import Pki, make_pki

ADMIN_PASSWORD = "admin-Secr3t-pw"
ALICE_PASSWORD = "alice-Secr3t-pw"
BOB_PASSWORD = "bob-Secr3t-pw"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="admin" password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}" user_alice="{ALICE_PASSWORD}";'
)


@dataclass
class SecureNode:
    broker: BrokerProcess
    pki: Pki
    sasl_ssl_port: int
    sasl_plaintext_port: int
    ssl_port: int

    @property
    def plaintext(self) -> str:
        return self.broker.bootstrap

    @property
    def sasl_ssl(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def sasl_plaintext(self) -> str:
        return f"127.0.0.1:{self.sasl_plaintext_port}"

    @property
    def ssl(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def librdkafka_sasl_ssl(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        return {
            "bootstrap.servers": self.sasl_ssl,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(self.pki.ca_cert),
        }

    def librdkafka_ssl(self) -> dict[str, str]:
        return {
            "bootstrap.servers": self.ssl,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.pki.ca_cert),
            "ssl.certificate.location": str(self.pki.client_cert),
            "ssl.key.location": str(self.pki.client_key),
        }


def format_scram(data_dir: Path, *users: tuple[str, str, str]) -> None:
    """`epochlog storage format --add-scram` for (mechanism, name, password) before the first start."""
    args = [sys.executable, "-m", "epochlog.cli.main", "storage", "format", "--data-dir", str(data_dir)]
    for mechanism, name, password in users:
        args += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
    subprocess.run(args, check=True, capture_output=True, timeout=60)


def start_secure_node(tmp: Path, extra: dict[str, str] | None = None) -> SecureNode:
    pki = make_pki(tmp / "pki")
    sasl_ssl, sasl_plain, ssl_port = free_port(), free_port(), free_port()
    data = tmp / "data"
    format_scram(
        data,
        ("SCRAM-SHA-512", "admin", ADMIN_PASSWORD),
        ("SCRAM-SHA-512", "alice", ALICE_PASSWORD),
        ("SCRAM-SHA-256", "alice", ALICE_PASSWORD),
        ("SCRAM-SHA-512", "bob", BOB_PASSWORD),
    )
    settings = {
        "listeners": (
            f"SASL_SSL://127.0.0.1:{sasl_ssl},SASL_PLAINTEXT://127.0.0.1:{sasl_plain},SSL://127.0.0.1:{ssl_port}"
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca_cert),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        **(extra or {}),
    }
    broker = BrokerProcess(data, settings=settings).start()
    return SecureNode(broker, pki, sasl_ssl, sasl_plain, ssl_port)
