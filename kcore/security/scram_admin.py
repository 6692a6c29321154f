"""SCRAM users through the admin API (KIP-554): what DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51) decide, as Kafka 3.5's ZkAdminManager decides it, sans-IO.

The requests and responses here are kcore's msgpack messages, with Kafka's field names
(the Kafka-protocol handlers translate the codec's dicts into them). A client never sends a
password: an upsertion carries the salt and the salted password (PBKDF2, computed by the
client), from which the broker derives the stored and server keys it keeps under the
mechanism's name in /config/users/<user>, in Kafka's stored form.

The shell (`KafkaApis`) reads and writes ZooKeeper around these functions:

- describe: `users_to_read(users)` (None: every user's configs), then
  `describe_credentials(users, configs)`;
- alter: `plan_alteration(request)` refuses what the request alone condemns and names the
  users whose configs to read; `apply_alteration(request, plan, configs)` refuses deletions
  of credentials that do not exist and gives each remaining user's new configs (other
  mechanisms and other configs, quotas say, kept), which the shell writes one user at a
  time, answering each user's own outcome.

Errors per user are Kafka's codes and messages: RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE,
UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence

import attrs

from kcore import errors
from kcore.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramError,
    credential_from_salted,
    salted_password,
)

# Kafka's public ScramMechanism: the byte each mechanism travels as (0 is UNKNOWN).
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {number: name for name, number in MECHANISM_TYPES.items()}

# Kafka's messages (ZkAdminManager, KafkaAdminClient).
USERNAME_MUST_NOT_BE_EMPTY = "Username must not be empty"
PASSWORD_MUST_NOT_BE_EMPTY = "Password must not be empty"
UNKNOWN_SCRAM_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW_ITERATIONS = "Too few iterations"
TOO_MANY_ITERATIONS = "Too many iterations"
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
DELETE_OF_MISSING_CREDENTIAL = "Attempt to delete a user credential that does not exist"
DESCRIBE_OF_MISSING_USER = "Attempt to describe a user credential that does not exist"
DESCRIBED_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request"
# Errors.NOT_CONTROLLER's message.
NOT_CONTROLLER = "This is not the correct controller for this cluster."
# Errors.UNKNOWN_SERVER_ERROR's message: what Kafka answers for an unexpected failure (a
# credential it cannot parse, a ZooKeeper write that failed).
UNEXPECTED_ERROR = "The server experienced an unexpected error when processing the request."


# -- the messages ------------------------------------------------------------------------


@attrs.frozen
class DescribeUserScramCredentialsRequest:
    users: tuple[str, ...] | None = None  # None or empty: every user


@attrs.frozen
class CredentialInfo:
    mechanism: int
    iterations: int


@attrs.frozen
class DescribeUserScramCredentialsResult:
    user: str
    error_code: int = 0
    error_message: str | None = None
    credential_infos: tuple[CredentialInfo, ...] = ()


@attrs.frozen
class DescribeUserScramCredentialsResponse:
    error_code: int = 0
    error_message: str | None = None
    results: tuple[DescribeUserScramCredentialsResult, ...] = ()


@attrs.frozen
class ScramCredentialDeletion:
    name: str
    mechanism: int


@attrs.frozen
class ScramCredentialUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes = attrs.field(repr=False)
    salted_password: bytes = attrs.field(repr=False)


@attrs.frozen
class AlterUserScramCredentialsRequest:
    deletions: tuple[ScramCredentialDeletion, ...] = ()
    upsertions: tuple[ScramCredentialUpsertion, ...] = ()


@attrs.frozen
class AlterUserScramCredentialsResult:
    user: str
    error_code: int = 0
    error_message: str | None = None


@attrs.frozen
class AlterUserScramCredentialsResponse:
    results: tuple[AlterUserScramCredentialsResult, ...] = ()


# -- describe ----------------------------------------------------------------------------


def describing_all(users: Sequence[str] | None) -> bool:
    return not users


def users_to_read(users: Sequence[str] | None) -> list[str] | None:
    """Whose configs a describe needs: None for every user's; else each named user once,
    leaving out the empty name and names given twice (answered without reading)."""
    if describing_all(users):
        return None
    assert users is not None
    times_named = Counter(users)
    return [user for user, times in times_named.items() if user and times == 1]


def describe_credentials(
    users: Sequence[str] | None, configs: Mapping[str, Mapping[str, str]]
) -> DescribeUserScramCredentialsResponse:
    """Kafka's describeUserScramCredentials, given the configs `users_to_read` asked for
    (every user's, by name, when describing all): each user's mechanisms and iterations.
    Describing all, users without a SCRAM credential are left out and the others come
    sorted by name; each user named is answered once, in the order first named (an
    unknown one RESOURCE_NOT_FOUND, one named twice DUPLICATE_RESOURCE)."""
    if describing_all(users):
        described = (_described(user, configs[user]) for user in sorted(configs))
        return DescribeUserScramCredentialsResponse(
            results=tuple(result for result in described if result is not None)
        )
    assert users is not None
    times_named = Counter(users)
    results = []
    for user in times_named:
        if not user:
            result = _describe_error(errors.ResourceNotFoundError, user, USERNAME_MUST_NOT_BE_EMPTY)
        elif times_named[user] > 1:
            result = _describe_error(
                errors.DuplicateResourceError, user, f"{DESCRIBED_TWICE}: {user}"
            )
        else:
            found = _described(user, configs.get(user, {}))
            result = found or _describe_error(
                errors.ResourceNotFoundError, user, f"{DESCRIBE_OF_MISSING_USER}: {user}"
            )
        results.append(result)
    return DescribeUserScramCredentialsResponse(results=tuple(results))


def _described(
    user: str, user_configs: Mapping[str, str]
) -> DescribeUserScramCredentialsResult | None:
    """The user's credentials (None: it has none). One Kafka cannot parse fails the user
    with UNKNOWN_SERVER_ERROR, as Kafka's does."""
    infos = []
    for name, number in MECHANISM_TYPES.items():
        stored = user_configs.get(name)
        if stored is None:
            continue
        try:
            infos.append(CredentialInfo(number, ScramCredential.from_config(stored).iterations))
        except ScramError:
            return _describe_error(errors.UnknownServerError, user, UNEXPECTED_ERROR)
    if not infos:
        return None
    return DescribeUserScramCredentialsResult(user, credential_infos=tuple(infos))


def _describe_error(
    error: type[errors.KafkaError], user: str, message: str
) -> DescribeUserScramCredentialsResult:
    return DescribeUserScramCredentialsResult(user, error.code, message)


# -- alter -------------------------------------------------------------------------------


@attrs.frozen
class AlterationPlan:
    """What the request alone decides: `refused` users (an empty name, an unknown
    mechanism, iterations outside [4096, 16384], a credential altered twice) and the
    `users` left, whose current configs the shell reads next."""

    refused: tuple[AlterUserScramCredentialsResult, ...]
    users: tuple[str, ...]


@attrs.frozen
class Alteration:
    """The rest of the answer: `refused` users (a deletion of a credential the user does
    not have) and each remaining user's new configs, to write (`writes`, in request
    order), each user then answered by its own write's outcome."""

    refused: tuple[AlterUserScramCredentialsResult, ...]
    writes: dict[str, dict[str, str]]


def plan_alteration(request: AlterUserScramCredentialsRequest) -> AlterationPlan:
    """Kafka's checks, in its order. A user with any illegal deletion or upsertion is
    refused as a whole, with the message of its last one (upsertions after deletions), as
    Kafka's map of them keeps it."""
    illegal: dict[str, str] = {}
    for deletion in request.deletions:
        if not deletion.name:
            illegal[deletion.name] = USERNAME_MUST_NOT_BE_EMPTY
        elif deletion.mechanism not in MECHANISM_NAMES:
            illegal[deletion.name] = UNKNOWN_SCRAM_MECHANISM
    for upsertion in request.upsertions:
        if not upsertion.name:
            illegal[upsertion.name] = USERNAME_MUST_NOT_BE_EMPTY
        elif upsertion.mechanism not in MECHANISM_NAMES:
            illegal[upsertion.name] = UNKNOWN_SCRAM_MECHANISM
        elif upsertion.iterations < MIN_ITERATIONS:
            illegal[upsertion.name] = TOO_FEW_ITERATIONS
        elif upsertion.iterations > MAX_ITERATIONS:
            illegal[upsertion.name] = TOO_MANY_ITERATIONS
    refused = [
        AlterUserScramCredentialsResult(
            user,
            errors.UnsupportedSaslMechanismError.code
            if message == UNKNOWN_SCRAM_MECHANISM
            else errors.UnacceptableCredentialError.code,
            message,
        )
        for user, message in illegal.items()
    ]
    pairs = [
        (alteration.name, alteration.mechanism)
        for alteration in (*request.upsertions, *request.deletions)
        if alteration.name not in illegal
    ]
    times_altered = Counter(pairs)
    twice = list(
        dict.fromkeys(user for user, mechanism in pairs if times_altered[user, mechanism] > 1)
    )
    refused.extend(
        AlterUserScramCredentialsResult(user, errors.DuplicateResourceError.code, ALTERED_TWICE)
        for user in twice
    )
    users = tuple(dict.fromkeys(user for user, _ in pairs if user not in twice))
    return AlterationPlan(tuple(refused), users)


def apply_alteration(
    request: AlterUserScramCredentialsRequest,
    plan: AlterationPlan,
    configs: Mapping[str, Mapping[str, str]],
) -> Alteration:
    """Given the current configs of `plan.users`: a user deleting a credential it does not
    have is refused (RESOURCE_NOT_FOUND); each other user's configs with its deletions
    removed and its upsertions stored (Kafka's ScramFormatter.generateCredential from the
    salt and salted password, in ScramCredentialUtils' form)."""
    missing = list(
        dict.fromkeys(
            deletion.name
            for deletion in request.deletions
            if deletion.name in plan.users
            and MECHANISM_NAMES[deletion.mechanism] not in configs[deletion.name]
        )
    )
    writes = {user: dict(configs[user]) for user in plan.users if user not in missing}
    for deletion in request.deletions:
        if deletion.name in writes:
            writes[deletion.name].pop(MECHANISM_NAMES[deletion.mechanism])
    for upsertion in request.upsertions:
        if upsertion.name in writes:
            mechanism = MECHANISM_NAMES[upsertion.mechanism]
            credential = credential_from_salted(
                mechanism,
                upsertion.salted_password,
                salt=upsertion.salt,
                iterations=upsertion.iterations,
            )
            writes[upsertion.name][mechanism] = credential.to_config()
    refused = tuple(
        AlterUserScramCredentialsResult(
            user, errors.ResourceNotFoundError.code, DELETE_OF_MISSING_CREDENTIAL
        )
        for user in missing
    )
    return Alteration(refused, writes)


def users_of(request: AlterUserScramCredentialsRequest) -> list[str]:
    """Every user the request names, once each, sorted (Kafka's getErrorResponse: the
    users an error for the whole request, NOT_CONTROLLER say, is answered for)."""
    return sorted({alteration.name for alteration in (*request.deletions, *request.upsertions)})


def answer_all(
    request: AlterUserScramCredentialsRequest, error: type[errors.KafkaError], message: str
) -> AlterUserScramCredentialsResponse:
    """The same error for every user the request names."""
    return AlterUserScramCredentialsResponse(
        tuple(
            AlterUserScramCredentialsResult(user, error.code, message) for user in users_of(request)
        )
    )


# -- the client's side (kcore's Admin) ---------------------------------------------------


@attrs.frozen
class ScramCredentialInfo:
    """A user's credential as described: its mechanism ("SCRAM-SHA-256", "SCRAM-SHA-512",
    or "UNKNOWN" for a number this client does not know) and iterations."""

    mechanism: str
    iterations: int


@attrs.frozen
class UserScramCredentialUpsertion:
    """A credential to create or replace (Kafka's UserScramCredentialUpsertion): `salt`
    is drawn by the Admin when None; the password never leaves the client, only the salt
    and the salted password do."""

    user: str
    mechanism: str
    iterations: int
    password: str = attrs.field(repr=False)
    salt: bytes | None = attrs.field(default=None, repr=False)


@attrs.frozen
class UserScramCredentialDeletion:
    user: str
    mechanism: str


ScramCredentialAlteration = UserScramCredentialUpsertion | UserScramCredentialDeletion


def alteration_request(
    alterations: Sequence[ScramCredentialAlteration], rng: random.Random
) -> tuple[AlterUserScramCredentialsRequest, dict[str, errors.KafkaError]]:
    """What Kafka's KafkaAdminClient sends for `alterations`, and the users it refuses
    without asking (an empty name or password, an unknown mechanism), none of whose
    alterations are sent. Each upsertion without a salt gets 32 random bytes from `rng`."""
    refused: dict[str, errors.KafkaError] = {}
    deletions = [a for a in alterations if isinstance(a, UserScramCredentialDeletion)]
    upsertions = [a for a in alterations if isinstance(a, UserScramCredentialUpsertion)]
    for deletion in deletions:
        if not deletion.user:
            refused[deletion.user] = errors.UnacceptableCredentialError(USERNAME_MUST_NOT_BE_EMPTY)
        elif deletion.mechanism not in MECHANISM_TYPES:
            refused[deletion.user] = errors.UnsupportedSaslMechanismError(UNKNOWN_SCRAM_MECHANISM)
    for upsertion in upsertions:
        if upsertion.user in refused:
            continue
        if not upsertion.user:
            refused[upsertion.user] = errors.UnacceptableCredentialError(USERNAME_MUST_NOT_BE_EMPTY)
        elif not upsertion.password:
            refused[upsertion.user] = errors.UnacceptableCredentialError(PASSWORD_MUST_NOT_BE_EMPTY)
        elif upsertion.mechanism not in MECHANISM_TYPES:
            refused[upsertion.user] = errors.UnsupportedSaslMechanismError(UNKNOWN_SCRAM_MECHANISM)
    request = AlterUserScramCredentialsRequest(
        tuple(
            ScramCredentialDeletion(d.user, MECHANISM_TYPES[d.mechanism])
            for d in deletions
            if d.user not in refused
        ),
        tuple(_salted(u, rng) for u in upsertions if u.user not in refused),
    )
    return request, refused


def _salted(
    upsertion: UserScramCredentialUpsertion, rng: random.Random
) -> ScramCredentialUpsertion:
    salt = upsertion.salt if upsertion.salt is not None else rng.randbytes(32)
    iterations = upsertion.iterations
    # Iterations the broker will refuse (its message says why) are not worth hashing: a
    # mistyped 10**9 would hold the client for minutes.
    salted = (
        salted_password(upsertion.mechanism, upsertion.password, salt, iterations)
        if MIN_ITERATIONS <= iterations <= MAX_ITERATIONS
        else b""
    )
    return ScramCredentialUpsertion(
        upsertion.user, MECHANISM_TYPES[upsertion.mechanism], iterations, salt, salted
    )


def credential_infos(result: DescribeUserScramCredentialsResult) -> tuple[ScramCredentialInfo, ...]:
    return tuple(
        ScramCredentialInfo(MECHANISM_NAMES.get(info.mechanism, "UNKNOWN"), info.iterations)
        for info in result.credential_infos
    )
