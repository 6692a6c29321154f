"""Kafka principals as settings name them: `Type:name` (`User:alice`), and `super.users`, a
`;`-separated list of them. Here rather than with the authorizer so that a broker config is
refused when it is read, and the authorizer (kcore.security.acl) parses ACLs with the same
rule."""

from __future__ import annotations


class PrincipalError(ValueError):
    """Not a principal (the message is Kafka's)."""


def parse_principal(text: str) -> str:
    """Kafka's SecurityUtils.parseKafkaPrincipal: `Type:name`, kept as that string;
    PrincipalError for one without a type or a name."""
    principal_type, colon, name = text.partition(":")
    if not colon or not principal_type or not name:
        raise PrincipalError(
            f"expected a string in format principalType:principalName but got {text}"
        )
    return text


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users`: principals separated by `;` (`User:admin;User:CN=broker1`)."""
    if not text:
        return frozenset()
    return frozenset(parse_principal(item.strip()) for item in text.split(";") if item.strip())
