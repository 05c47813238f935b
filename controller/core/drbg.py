"""The random number generator: HMAC_DRBG (NIST SP 800-90A Rev. 1, §10.1.2) with SHA-256.

Pure: no I/O. Entropy comes in from the caller (``controller.rng.session`` reads the
operating system's generator); this module only derives numbers from it, so that the same seed
material always gives the same numbers and a verifier can replay every draw afterwards.

Regulators (N.J.A.C. 13:69E-1.28G, 25 CFR 547.14, AGCO 5.1) require every value of the scaled
range to be equally probable, so numbers are scaled by rejection (SP 800-90A Rev. 1, Appendix
A.5.1, "the simple discard method"): never a modulo of a wider number, never a float.

Self-tests (SP 800-90A Rev. 1, §11.3): :func:`known_answer_test` runs a NIST CAVP vector through
instantiate, reseed and generate, and every instance runs the continuous test of FIPS 140-2
§4.9.2: two consecutive identical output blocks are a failure, after which the instance refuses
to generate anything more.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Any, Final

from controller.core.dice import Roll
from controller.errors import RngError, RngSelfTestFailure

OUTLEN: Final = 32  # SHA-256 output, bytes
SECURITY_STRENGTH: Final = 32  # 256 bits, bytes (SP 800-57: HMAC-SHA-256 supports 256)
MIN_ENTROPY_BYTES: Final = SECURITY_STRENGTH  # §10.1.2.3: entropy_input of security_strength
MIN_NONCE_BYTES: Final = SECURITY_STRENGTH // 2  # §8.6.7: half the security strength
MAX_REQUEST_BYTES: Final = 1 << 16  # Table 2: max_number_of_bits_per_request = 2^19 bits
MAX_INPUT_BYTES: Final = 1 << 32  # Table 2: max_length of inputs = 2^35 bits
MAX_RESEED_INTERVAL: Final = 1 << 48  # Table 2: reseed_interval ≤ 2^48 requests

DICE_OUTCOMES: Final = 216  # 6 × 6 × 6: red, first blue, second blue
MAX_REJECTIONS: Final = 128  # a healthy generator is rejected this often with p < 2^-128


_BLOCK = 64  # SHA-256's block size: HMAC pads a 32-byte key to it (RFC 2104)
_TRANS_IPAD = bytes(x ^ 0x36 for x in range(256))  # key XOR ipad, byte by byte, in C
_TRANS_OPAD = bytes(x ^ 0x5C for x in range(256))
_SHA256 = hashlib.sha256


class _KeyedHmac:
    """HMAC-SHA-256 (RFC 2104) for one key, on ``hashlib``: the inner and outer hashes of the
    padded key are computed once and copied for each message, instead of being set up again
    (and OpenSSL's algorithm fetched again) for every call as ``hmac.digest`` does. The
    DRBG's key changes only a few times per request while V is hashed under it repeatedly."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        padded = key.ljust(_BLOCK, b"\x00")  # the DRBG's keys are 32 bytes, never longer
        self._inner: Any = _SHA256(padded.translate(_TRANS_IPAD))
        self._outer: Any = _SHA256(padded.translate(_TRANS_OPAD))

    def digest(self, message: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()  # type: ignore[no-any-return]


class HmacDrbg:
    """One HMAC_DRBG instance (SP 800-90A Rev. 1, §10.1.2) with SHA-256, no prediction resistance.

    ``entropy`` must carry at least 256 bits of entropy and ``nonce`` at least 128 bits
    (§8.6.7); ``personalization`` names what the instance is for. The working state (K, V)
    is never shown: ``repr`` gives only the reseed counter.
    """

    __slots__ = (
        "_failed",
        "_key",
        "_keyed",
        "_previous_block",
        "_reseed_counter",
        "_value",
        "reseed_interval",
    )

    def __init__(
        self,
        entropy: bytes,
        nonce: bytes,
        personalization: bytes = b"",
        *,
        reseed_interval: int = MAX_RESEED_INTERVAL,
    ) -> None:
        # §10.1.2.3 Instantiate_algorithm.
        _check_entropy(entropy)
        if len(nonce) < MIN_NONCE_BYTES:
            raise RngError(f"nonce of {len(nonce)} bytes is below {MIN_NONCE_BYTES}")
        _check_input("personalization", personalization)
        if not 1 <= reseed_interval <= MAX_RESEED_INTERVAL:
            raise RngError(f"reseed interval {reseed_interval} is not 1..2^48")
        self.reseed_interval = reseed_interval
        self._key = b"\x00" * OUTLEN
        self._keyed = (self._key, _KeyedHmac(self._key))  # the last key HMAC'd with
        self._value = b"\x01" * OUTLEN
        self._update(entropy + nonce + personalization)
        self._reseed_counter = 1
        self._previous_block: bytes | None = None
        self._failed = False

    def __repr__(self) -> str:
        return f"<HmacDrbg SHA-256 reseed_counter={self._reseed_counter}>"

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        """HMAC-SHA-256, the one primitive (tests replace it with a broken one)."""
        if key is not self._keyed[0]:
            self._keyed = (key, _KeyedHmac(key))
        return self._keyed[1].digest(message)

    def _update(self, provided_data: bytes) -> None:
        """§10.1.2.2 HMAC_DRBG_Update."""
        key = self._hmac(self._key, self._value + b"\x00" + provided_data)
        value = self._hmac(key, self._value)
        if provided_data:
            key = self._hmac(key, value + b"\x01" + provided_data)
            value = self._hmac(key, value)
        self._key, self._value = key, value

    def reseed(self, entropy: bytes, additional_input: bytes = b"") -> None:
        """§10.1.2.4 Reseed_algorithm."""
        self._check_usable()
        _check_entropy(entropy)
        _check_input("additional input", additional_input)
        self._update(entropy + additional_input)
        self._reseed_counter = 1

    def generate(self, n_bytes: int, additional_input: bytes = b"") -> bytes:
        """§10.1.2.5 Generate_algorithm: ``n_bytes`` (1..65536) pseudorandom bytes."""
        self._check_usable()
        if not 1 <= n_bytes <= MAX_REQUEST_BYTES:
            raise RngError(f"request of {n_bytes} bytes is not 1..{MAX_REQUEST_BYTES}")
        _check_input("additional input", additional_input)
        if self._reseed_counter > self.reseed_interval:
            # Step 1: "return an indication that a reseed is required". We never continue
            # past the interval; the session is closed and a fresh one instantiated.
            raise RngError("HMAC_DRBG reseed interval reached: reseed required")
        if additional_input:
            self._update(additional_input)
        blocks = []
        produced = 0
        while produced < n_bytes:
            self._value = self._hmac(self._key, self._value)
            self._continuous_test(self._value)
            blocks.append(self._value)
            produced += OUTLEN
        self._update(additional_input)
        self._reseed_counter += 1
        return b"".join(blocks)[:n_bytes]

    def _continuous_test(self, block: bytes) -> None:
        """FIPS 140-2 §4.9.2: each output block differs from the one before it."""
        if block == self._previous_block:
            self._failed = True
            raise RngSelfTestFailure("continuous test: two consecutive identical output blocks")
        self._previous_block = block

    def _check_usable(self) -> None:
        if self._failed:
            raise RngSelfTestFailure("this DRBG instance failed its continuous test")


def _check_entropy(entropy: bytes) -> None:
    if len(entropy) < MIN_ENTROPY_BYTES:
        raise RngError(f"entropy of {len(entropy)} bytes is below {MIN_ENTROPY_BYTES} (256 bits)")
    _check_input("entropy", entropy)


def _check_input(what: str, data: bytes) -> None:
    if len(data) > MAX_INPUT_BYTES:
        raise RngError(f"{what} of {len(data)} bytes is over 2^35 bits")


# --- self-test ------------------------------------------------------------------------------

# NIST CAVP drbgtestvectors.zip (CAVS 14.3), drbgvectors_pr_false/HMAC_DRBG.rsp,
# [SHA-256] [PersonalizationStringLen = 256] [AdditionalInputLen = 256], COUNT = 0.
# It goes through every path: personalization, reseed with additional input, generate with
# additional input. Also vendored in tests/vectors/ with the others.
_KAT_ENTROPY = bytes.fromhex("cdb0d9117cc6dbc9ef9dcb06a97579841d72dc18b2d46a1cb61e314012bdf416")
_KAT_NONCE = bytes.fromhex("d0c0d01d156016d0eb6b7e9c7c3c8da8")
_KAT_PERSONALIZATION = bytes.fromhex(
    "6f0fb9eab3f9ea7ab0a719bfa879bf0aaed683307fda0c6d73ce018b6e34faaa"
)
_KAT_ENTROPY_RESEED = bytes.fromhex(
    "8ec6f7d5a8e2e88f43986f70b86e050d07c84b931bcf18e601c5a3eee3064c82"
)
_KAT_ADDITIONAL_RESEED = bytes.fromhex(
    "1ab4ca9014fa98a55938316de8ba5a68c629b0741bdd058c4d70c91cda5099b3"
)
_KAT_ADDITIONAL = (
    bytes.fromhex("16e2d0721b58d839a122852abd3bf2c942a31c84d82fca74211871880d7162ff"),
    bytes.fromhex("53686f042a7b087d5d2eca0d2a96de131f275ed7151189f7ca52deaa78b79fb2"),
)
_KAT_RETURNED = bytes.fromhex(
    "dda04a2ca7b8147af1548f5d086591ca4fd951a345ce52b3cd49d47e84aa31a1"
    "83e31fbc42a1ff1d95afec7143c8008c97bc2a9c091df0a763848391f68cb4a3"
    "66ad89857ac725a53b303ddea767be8dc5f605b1b95f6d24c9f06be65a973a08"
    "9320b3cc42569dcfd4b92b62a993785b0301b3fc452445656fce22664827b88f"
)


def known_answer_test(drbg_class: type[HmacDrbg] = HmacDrbg) -> None:
    """SP 800-90A Rev. 1 §11.3: run one CAVP vector; raise :class:`RngSelfTestFailure` if the
    implementation does not reproduce it. Run before a session is opened: on failure the RNG
    mode is refused."""
    try:
        drbg = drbg_class(_KAT_ENTROPY, _KAT_NONCE, _KAT_PERSONALIZATION)
        drbg.reseed(_KAT_ENTROPY_RESEED, _KAT_ADDITIONAL_RESEED)
        drbg.generate(len(_KAT_RETURNED), _KAT_ADDITIONAL[0])
        returned = drbg.generate(len(_KAT_RETURNED), _KAT_ADDITIONAL[1])
    except RngSelfTestFailure:
        raise
    except Exception as exc:
        raise RngSelfTestFailure(f"known-answer test raised {type(exc).__name__}: {exc}") from exc
    if not hmac.compare_digest(returned, _KAT_RETURNED):
        raise RngSelfTestFailure("known-answer test: HMAC_DRBG output differs from NIST CAVP")


# --- scaling --------------------------------------------------------------------------------

ByteSource = Callable[[int], bytes]


def uniform_below(n: int, source: ByteSource) -> int:
    """A number in 0..n-1, every value exactly equally probable if ``source`` is uniform.

    SP 800-90A Rev. 1 Appendix A.5.1 (simple discard): take the fewest bytes holding n-1,
    keep the fewest low bits holding n-1, and discard values of n or more. Acceptance is above
    one half, so a healthy generator almost never needs more than a few tries; MAX_REJECTIONS
    in a row means the generator is broken, never a reason to fall back on a biased method.
    """
    if n < 1:
        raise RngError(f"range of {n} values is empty")
    if n == 1:
        return 0
    bits = (n - 1).bit_length()
    n_bytes = (bits + 7) // 8
    mask = (1 << bits) - 1
    for _ in range(MAX_REJECTIONS):
        candidate = int.from_bytes(source(n_bytes), "big") & mask
        if candidate < n:
            return candidate
    raise RngSelfTestFailure(f"{MAX_REJECTIONS} consecutive rejections scaling to {n} values")


def number_in_range(n: int, source: ByteSource) -> int:
    """A number in 1..n (a count for the starting position), uniform."""
    return uniform_below(n, source) + 1


def roll_of_outcome(outcome: int) -> Roll:
    """Three virtual dice from one of the 216 equally probable outcomes (0..215), red first:
    the base-6 digits of the outcome. A bijection, so uniform outcomes give fair dice."""
    if not 0 <= outcome < DICE_OUTCOMES:
        raise RngError(f"dice outcome {outcome} is not 0..{DICE_OUTCOMES - 1}")
    red, rest = divmod(outcome, 36)
    blue_1, blue_2 = divmod(rest, 6)
    return Roll(red + 1, (blue_1 + 1, blue_2 + 1))


def virtual_roll(source: ByteSource) -> Roll:
    """Three virtual dice (red, blue, blue) from one uniform draw in 0..215."""
    return roll_of_outcome(uniform_below(DICE_OUTCOMES, source))


def bound_source(drbg: HmacDrbg, additional_input: bytes) -> ByteSource:
    """A byte source whose every request passes ``additional_input`` (the round's identity),
    so that a rejected and redrawn value is bound to the same round as the first try."""

    def source(n_bytes: int) -> bytes:
        return drbg.generate(n_bytes, additional_input)

    return source
