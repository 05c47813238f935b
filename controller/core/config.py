"""The configuration: one TOML file, read with tomllib and validated before anything starts.

Each section is a frozen dataclass; a field's metadata gives its range or its choices. An
unknown section or key, a wrong type or a value out of range is refused with a
:class:`ConfigError` naming ``section.key``; the command line turns that into exit 78.
The example in ``hw/config.example.toml`` documents every key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from controller.core.dealing import DeliveryStyle
from controller.core.dice import ReadPolicy
from controller.core.digits import is_ascii_digits, parse_bounded_int, quoted
from controller.core.note import ALG_COSIGNATURE_V1, Verifier
from controller.core.position import Game
from controller.core.rng_escrow import parse_escrow_key
from controller.core.state import MIN_SHAKE_CYCLES, Mode, RngMode, RoundSettings
from controller.core.wagers import (
    BeatItCondition,
    Odds,
    Paytable,
    SumCondition,
    Wager,
    sum_paytable_a,
    sum_paytable_b,
)
from controller.errors import ConfigError, EscrowError, NoteError

MAX_TEXT_CHARS = 4096  # a path, a URL or a host name (PATH_MAX)
MAX_BRAND_CHARS = 40  # the certificate holder's name on the table page (621a.2(b)(1))
LIMIT_MAX = 10_000_000  # a table limit, in whole units of the currency
LIMIT_WAGERS = ("table", "sum", "match", "beat_it")  # the main wager, then the side wagers
ODDS_WIN_MAX = 100_000  # "N to M": 1 <= N <= ODDS_WIN_MAX, 1 <= M <= ODDS_STAKE_MAX
ODDS_STAKE_MAX = 1000
MAX_ORIGIN_CHARS = 100  # [fleet] origin
# The shape of the file: the deepest legitimate key is paytables.NAME.pays.OUTCOME (three
# tables deep); a few thousand keys and list items hold every section and a casino's paytables
MAX_NESTING = 8  # tables and lists within one another
MAX_KEYS = 4096  # keys and list items in the whole file


def _range(low: float | None = None, high: float | None = None) -> dict[str, Any]:
    return {"low": low, "high": high}


@dataclass(frozen=True, slots=True)
class TableConfig:
    name: str = field(default="table-1", metadata={"pattern": "name"})
    game: Game = Game.TILES
    mode: Mode = Mode.SHAKER
    # current 621a.6(a): the other modes the supervisor may switch the table to (and to the RNG
    # out of a fault of the dice); none by default
    modes: tuple[Mode, ...] = ()
    # Issue 15: on a dice alarm the table locks after the round (bets do not open again until
    # the supervisor replaces the dice or keeps them after inspection); by default play goes on
    lock_on_dice_alarm: bool = False


@dataclass(frozen=True, slots=True)
class RulesConfig:
    """The casino's Rules Submission (601a.2), as far as it decides what the controller
    offers: the styles of delivery the bank may choose besides 621a.8(d) (621a.9; tiles only),
    whether players may bank (621a.11(a), 645a.12(a)) and co-bank with the dealer (621a.11(e),
    645a.12(e))."""

    delivery_styles: tuple[DeliveryStyle, ...] = tuple(
        s for s in DeliveryStyle if s is not DeliveryStyle.STANDARD
    )
    player_bank: bool = True
    co_banking: bool = False


@dataclass(frozen=True, slots=True)
class RoundConfig:
    min_shake_cycles: int = field(default=MIN_SHAKE_CYCLES, metadata=_range(MIN_SHAKE_CYCLES, 50))
    settle_ms: int = field(default=1500, metadata=_range(0, 10_000))
    read_timeout_ms: int = field(default=5000, metadata=_range(100, 60_000))
    max_reshakes: int = field(default=5, metadata=_range(1, 50))
    reads_to_agree: int = field(default=2, metadata=_range(1, 10))
    min_confidence: int = field(default=80, metadata=_range(1, 100))
    position_tolerance_mm: int = field(default=3, metadata=_range(0, 100))
    # Issue 14: the motor starts a random time after the player's press (drawn by the shell
    # from the OS CSPRNG, uniform over [min, max], recorded with the shake), so that when a
    # player presses cannot time the dice. 0 and 0: at once.
    shake_delay_min_ms: int = field(default=250, metadata=_range(0, 5000))
    shake_delay_max_ms: int = field(default=1000, metadata=_range(0, 5000))

    def __post_init__(self) -> None:
        if self.shake_delay_max_ms < self.shake_delay_min_ms:
            raise ConfigError(
                "round.shake_delay_max_ms",
                f"{self.shake_delay_max_ms} is below round.shake_delay_min_ms"
                f" ({self.shake_delay_min_ms})",
            )


@dataclass(frozen=True, slots=True)
class ShakerConfig:
    motor_max_ms: int = field(default=8000, metadata=_range(500, 30_000))
    shake_ms: int = field(default=3000, metadata=_range(300, 30_000))
    amplitude: float = field(default=0.8, metadata=_range(0.1, 1.0))
    cycle_ms: int = field(default=400, metadata=_range(50, 5000))
    debounce_ms: int = field(default=30, metadata=_range(1, 1000))

    @property
    def cycles(self) -> int:
        """Complete shake cycles in one pattern."""
        return self.shake_ms // self.cycle_ms

    def __post_init__(self) -> None:
        if self.cycles < MIN_SHAKE_CYCLES:
            raise ConfigError(
                "shaker.shake_ms",
                f"{self.shake_ms} ms of {self.cycle_ms} ms cycles is {self.cycles} cycles; "
                f"a shake needs at least {MIN_SHAKE_CYCLES} (621a.8(a)(2))",
            )
        if self.motor_max_ms < (self.cycles + 1) * self.cycle_ms:
            raise ConfigError(
                "shaker.motor_max_ms",
                f"must exceed the shake ({self.cycles * self.cycle_ms} ms) by at least one cycle",
            )


@dataclass(frozen=True, slots=True)
class SensorConfig:
    url: str = "/dev/paigow-dice"
    baudrate: int = field(
        default=115200,
        metadata={"choices": (9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600)},
    )
    timeout_ms: int = field(default=500, metadata=_range(10, 10_000))
    retries: int = field(default=3, metadata=_range(0, 10))


@dataclass(frozen=True, slots=True)
class RngConfig:
    mode: RngMode = RngMode.POSITION
    session_max_rounds: int = field(default=500, metadata=_range(1, 1_000_000))
    # the auditor's X25519 public key, base64 (rng-escrow-key prints it): each session's seed
    # is sealed to it in its commitment (controller/core/rng_escrow.py); RNG mode needs one
    escrow_public_key: str = field(default="", metadata={"may_be_empty": True, "max_chars": 200})

    def __post_init__(self) -> None:
        if self.escrow_public_key:
            try:
                parse_escrow_key(self.escrow_public_key)
            except EscrowError as exc:
                raise ConfigError("rng.escrow_public_key", f"not an X25519 key: {exc}") from None


def require_escrow_key(config: Config) -> None:
    """A table that may play RNG mode ([table] mode or modes) seals each session's seed to the
    auditor's key: without one it is refused (its seed would be lost at a power cut)."""
    table = config.table
    if (table.mode is Mode.RNG or Mode.RNG in table.modes) and not config.rng.escrow_public_key:
        raise ConfigError(
            "rng.escrow_public_key",
            "RNG mode needs the auditor's X25519 public key (paigow-controller rng-escrow-key"
            " makes the pair)",
        )


MIN_RETAIN_ROUNDS = 100  # game recall, the display's trend board: never archived
MAX_RETAIN_ROUNDS = 100_000_000
MAX_RETAIN_DAYS = 36_525  # a century


@dataclass(frozen=True, slots=True)
class StorageConfig:
    state_dir: str = "/var/lib/paigow-controller"
    # Retention (controller/audit/archive.py): the oldest whole rounds beyond both limits move
    # to signed archive files in the state directory's archive/; 0 is no limit, and with both
    # 0 (the default) nothing is archived. The newest MIN_RETAIN_ROUNDS rounds always stay.
    retain_rounds: int = field(default=0, metadata=_range(0, MAX_RETAIN_ROUNDS))
    retain_days: int = field(default=0, metadata=_range(0, MAX_RETAIN_DAYS))
    # A second place for the log's anchor (controller/audit/anchor.py), best on another
    # filesystem: an absolute directory that exists and the service may write ("": none)
    anchor_copy_dir: str = field(default="", metadata={"may_be_empty": True})

    def __post_init__(self) -> None:
        # the log's directory is the same whatever directory the service starts in
        if not self.state_dir.startswith("/"):
            raise ConfigError("storage.state_dir", "must be an absolute path")
        if 0 < self.retain_rounds < MIN_RETAIN_ROUNDS:
            raise ConfigError(
                "storage.retain_rounds",
                f"{self.retain_rounds} is below {MIN_RETAIN_ROUNDS} (0: keep every round)",
            )
        if self.anchor_copy_dir:
            if not self.anchor_copy_dir.startswith("/"):
                raise ConfigError("storage.anchor_copy_dir", "must be an absolute path")
            if self.anchor_copy_dir.rstrip("/") == self.state_dir.rstrip("/"):
                raise ConfigError(
                    "storage.anchor_copy_dir",
                    "must be another directory than storage.state_dir (a second place)",
                )


@dataclass(frozen=True, slots=True)
class SoftwareConfig:
    """``[software]``: program verification (``controller/software/check.py``). The software
    is checked against its signed manifest at start and every ``check_every_s``."""

    # the manifest's path ("": controller/MANIFEST.json in the installed package)
    manifest: str = field(default="", metadata={"may_be_empty": True})
    # the release key's verifier (name+keyid+base64; "": release.pub beside the manifest)
    public_key: str = field(default="", metadata={"may_be_empty": True, "max_chars": 200})
    # run: no manifest installed is a fault (false: recorded as unverified, play goes on)
    required: bool = True
    check_every_s: int = field(default=3600, metadata=_range(60, 86_400))

    def __post_init__(self) -> None:
        if self.manifest and not self.manifest.startswith("/"):
            raise ConfigError("software.manifest", "must be an absolute path")
        if self.public_key:
            try:
                Verifier.parse(self.public_key)
            except NoteError as exc:
                raise ConfigError("software.public_key", f"not a verifier key: {exc}") from None


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """``[fleet]``: every record, the latest signed checkpoint and the table's status to the
    casino's MQTT broker (controller/fleet), for the floor's systems and the witness that
    anchors the log outside the box. Off when ``mqtt_url`` is empty (the default)."""

    mqtt_url: str = field(default="", metadata={"may_be_empty": True, "max_chars": 300})
    # mqtts: the CA that signed the broker's certificate (required), and the table's client
    # certificate and key (optional, both or neither)
    ca_file: str = field(default="", metadata={"may_be_empty": True})
    cert_file: str = field(default="", metadata={"may_be_empty": True})
    key_file: str = field(default="", metadata={"may_be_empty": True})
    # two lines, user name and password: a file only the service's user may read (0600/0400)
    credentials_file: str = field(default="", metadata={"may_be_empty": True})
    # the witness's cosigner key (C2SP vkey, algorithm 0x04): its cosignatures of this log are
    # checked with it, shown and recorded; "": cosignatures are not taken
    witness_key: str = field(default="", metadata={"may_be_empty": True, "max_chars": 200})
    keepalive_s: int = field(default=30, metadata=_range(5, 600))
    # an orderly stop sends what is left for at most this long
    stop_flush_s: int = field(default=5, metadata=_range(0, 60))
    # the log's origin and its key's name, globally unique ("casino.example/paigow/table-7"):
    # a new log's key gets it; an existing log of another origin is refused (exit 78). "": a
    # new log is paigow-controller/<table>, as tables made before it was configurable
    origin: str = field(default="", metadata={"may_be_empty": True, "max_chars": MAX_ORIGIN_CHARS})

    def __post_init__(self) -> None:  # noqa: C901 - input validator
        if self.origin:
            problem = origin_problem(self.origin)
            if problem is not None:
                raise ConfigError("fleet.origin", problem)
        if not self.mqtt_url:
            return
        try:
            address = parse_broker_url(self.mqtt_url)
        except ValueError as exc:
            raise ConfigError("fleet.mqtt_url", str(exc)) from None
        for key in ("ca_file", "cert_file", "key_file", "credentials_file"):
            value = getattr(self, key)
            if value and not value.startswith("/"):
                raise ConfigError(f"fleet.{key}", "must be an absolute path")
        if address.tls and not self.ca_file:
            raise ConfigError("fleet.ca_file", "mqtts:// needs the broker's CA file")
        if not address.tls and (self.ca_file or self.cert_file or self.key_file):
            raise ConfigError("fleet.mqtt_url", "certificates are for mqtts:// only")
        if bool(self.cert_file) != bool(self.key_file):
            raise ConfigError("fleet.key_file", "a client certificate needs its key, and back")
        if self.witness_key:
            try:
                Verifier.parse(self.witness_key, ALG_COSIGNATURE_V1)
            except NoteError as exc:
                raise ConfigError("fleet.witness_key", f"not a cosigner key: {exc}") from None

    @property
    def broker(self) -> BrokerAddress | None:
        return parse_broker_url(self.mqtt_url) if self.mqtt_url else None


def origin_problem(origin: str) -> str | None:
    """Why ``origin`` is not a log origin the fleet can tell from every other one (README,
    "Many tables: the fleet publisher"): ``<DNS name with a dot>/<path>``, ASCII, no spaces,
    no ``+`` (a key name's separator), at most MAX_ORIGIN_CHARS; None when it is one."""
    if len(origin) > MAX_ORIGIN_CHARS:
        return f"at most {MAX_ORIGIN_CHARS} characters"
    if not origin.isascii() or not origin.isprintable() or " " in origin or "+" in origin:
        return "printable ASCII without spaces or '+'"
    host, slash, path = origin.partition("/")
    labels = host.split(".")
    if len(labels) < 2 or not all(_is_dns_label(label) for label in labels):
        return f"{quoted(origin)} does not start with a DNS name with a dot (casino.example/...)"
    if not slash or not all(path.split("/")):
        return f"{quoted(origin)} is not <DNS name>/<path> (e.g. casino.example/paigow/table-7)"
    return None


def _is_dns_label(label: str) -> bool:
    return (
        1 <= len(label) <= 63
        and all(c.isalnum() or c == "-" for c in label)
        and not label.startswith("-")
        and not label.endswith("-")
    )


# --- the broker's address ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    host: str
    port: int
    tls: bool

    def __str__(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"


def parse_broker_url(text: str) -> BrokerAddress:  # noqa: C901 - input validator
    """``mqtt://host:port`` or ``mqtts://host:port`` (port default 1883 / 8883); nothing else:
    no user, path, query or fragment (credentials come from a file)."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in ("mqtt", "mqtts"):
        raise ValueError("must be mqtt://host:port or mqtts://host:port")
    if not rest or any(c in rest for c in "@/?#") or not rest.isascii() or not rest.isprintable():
        raise ValueError("must be mqtt://host:port: no user, path, query or spaces")
    tls = scheme == "mqtts"
    if rest.startswith("["):  # an IPv6 literal
        host, bracket, after = rest[1:].partition("]")
        if not bracket or not host or (after and not after.startswith(":")):
            raise ValueError("a bad IPv6 address")
        port_text = after[1:] if after else ""
    else:
        host, _, port_text = rest.partition(":")
    if not host or len(host) > 253 or " " in host:
        raise ValueError("no host")
    if port_text:
        if not (port_text.isascii() and port_text.isdigit() and len(port_text) <= 5):
            raise ValueError("the port is 1 to 65535")
        port = int(port_text)
        if not 1 <= port <= 65535:
            raise ValueError("the port is 1 to 65535")
    else:
        port = 8883 if tls else 1883
    return BrokerAddress(host, port, tls)


class Language(StrEnum):
    """A language of the table page's player-facing text (issue 16: Pai Gow's players are
    often Chinese-speaking)."""

    EN = "en"
    ZH_HANT = "zh-Hant"  # Traditional Chinese


ROTATIONS = (0, 90, 180, 270)  # [display] rotation: the screen's quarter turns


@dataclass(frozen=True, slots=True)
class DisplayConfig:
    host: str = "127.0.0.1"
    http_port: int = field(default=8080, metadata=_range(1, 65535))
    feed_port: int = field(default=8081, metadata=_range(1, 65535))
    stats_panel: bool = True  # issue 15: the players' statistics panel beside the trend board
    # Issue 16: the page's languages, in the order shown; one or both
    languages: tuple[Language, ...] = (Language.EN, Language.ZH_HANT)
    # 621a.2(b)(1): the layout carries the certificate holder's name; the page shows it too
    brand: str = field(default="", metadata={"max_chars": MAX_BRAND_CHARS, "may_be_empty": True})
    # The kiosk's screen turned clockwise, in degrees, for a display mounted in portrait or
    # upside down (hw/kiosk/kiosk-session applies it to the screen and its touch input)
    rotation: int = field(default=0, metadata=_range(0, 270))

    def __post_init__(self) -> None:
        if self.rotation not in ROTATIONS:
            raise ConfigError(
                "display.rotation",
                f"must be one of {', '.join(map(str, ROTATIONS))} (degrees clockwise),"
                f" not {self.rotation}",
            )
        if not self.languages:
            choices = ", ".join(str(m) for m in Language)
            raise ConfigError("display.languages", f"must name at least one of {choices}")
        if self.feed_port == self.http_port != 0:  # 0: any free port (tests, benches)
            # one of the two servers could never listen: the table would start without it
            raise ConfigError(
                "display.feed_port",
                f"{self.feed_port} is display.http_port too: the page and the feed need one each",
            )


@dataclass(frozen=True, slots=True)
class BetLimits:
    """The smallest and the largest wager a table takes, in whole units of the currency."""

    min: int
    max: int


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    """``[limits]``: the table limits shown while bets are open (issue 16). Only the wagers
    given a ``[limits.NAME]`` table are shown; a config without ``[limits]`` shows none."""

    currency: str = "USD"  # ISO 4217: three capital letters
    table: BetLimits | None = None  # the Pai Gow wager itself
    sum: BetLimits | None = None
    match: BetLimits | None = None
    beat_it: BetLimits | None = None

    def configured(self) -> dict[str, BetLimits]:
        """The wagers given limits, in the order of ``LIMIT_WAGERS``."""
        found = {name: getattr(self, name) for name in LIMIT_WAGERS}
        return {name: limits for name, limits in found.items() if limits is not None}


@dataclass(frozen=True, slots=True)
class PinsConfig:
    """BCM pin numbers; see hw/pinout.md."""

    motor: int = field(default=12, metadata=_range(0, 27))
    shake_button: int = field(default=17, metadata=_range(0, 27))
    shake_button_lamp: int = field(default=27, metadata=_range(0, 27))
    lid_switch: int = field(default=22, metadata=_range(0, 27))
    motion_sensor: int = field(default=23, metadata=_range(0, 27))
    tamper_switch: int = field(default=24, metadata=_range(0, 27))
    key_no_more_bets: int = field(default=5, metadata=_range(0, 27))
    key_close_round: int = field(default=6, metadata=_range(0, 27))
    key_void_round: int = field(default=13, metadata=_range(0, 27))
    supervisor_key: int = field(default=19, metadata=_range(0, 27))
    lamp_red: int = field(default=16, metadata=_range(0, 27))
    lamp_green: int = field(default=20, metadata=_range(0, 27))
    lamp_blue: int = field(default=21, metadata=_range(0, 27))
    key_clear_fault: int = field(default=26, metadata=_range(0, 27))
    key_dice_set: int = field(default=25, metadata=_range(0, 27))
    key_bank_seat: int = field(default=4, metadata=_range(0, 27))
    key_style: int = field(default=18, metadata=_range(0, 27))
    key_shift_change: int = field(default=7, metadata=_range(0, 27))
    key_shuffle: int = field(default=8, metadata=_range(0, 27))


@dataclass(frozen=True, slots=True)
class Config:
    table: TableConfig = TableConfig()
    rules: RulesConfig = RulesConfig()
    round: RoundConfig = RoundConfig()
    shaker: ShakerConfig = ShakerConfig()
    sensor: SensorConfig = SensorConfig()
    rng: RngConfig = RngConfig()
    storage: StorageConfig = StorageConfig()
    software: SoftwareConfig = SoftwareConfig()
    fleet: FleetConfig = FleetConfig()
    display: DisplayConfig = DisplayConfig()
    pins: PinsConfig = PinsConfig()
    limits: LimitsConfig | None = None  # issue 16: absent, no limits are shown
    paytables: tuple[Paytable, ...] = field(
        default_factory=lambda: (sum_paytable_a(), sum_paytable_b())
    )
    source_sha256: str = ""  # SHA-256 of the file's bytes, for the config_loaded record

    def round_settings(self) -> RoundSettings:
        r = self.round
        return RoundSettings(
            game=self.table.game,
            mode=self.table.mode,
            modes=self.table.modes,
            styles=tuple(s for s in self.rules.delivery_styles if s is not DeliveryStyle.STANDARD),
            player_bank=self.rules.player_bank,
            co_banking=self.rules.co_banking,
            lock_on_dice_alarm=self.table.lock_on_dice_alarm,
            rng_mode=self.rng.mode,
            min_shake_cycles=r.min_shake_cycles,
            settle_ms=r.settle_ms,
            read_timeout_ms=r.read_timeout_ms,
            motor_max_ms=self.shaker.motor_max_ms,
            max_reshakes=r.max_reshakes,
            read_policy=ReadPolicy(r.reads_to_agree, r.min_confidence, r.position_tolerance_mm),
            paytables=self.paytables,
        )


_SECTIONS: Mapping[str, type[Any]] = {
    "table": TableConfig,
    "rules": RulesConfig,
    "round": RoundConfig,
    "shaker": ShakerConfig,
    "sensor": SensorConfig,
    "rng": RngConfig,
    "storage": StorageConfig,
    "software": SoftwareConfig,
    "fleet": FleetConfig,
    "display": DisplayConfig,
    "pins": PinsConfig,
}


def config_from_bytes(data: bytes, *, source: str, escrow_required: bool = True) -> Config:
    """Validate the bytes of a config file (``source`` names it in messages). Raises
    :class:`ConfigError` naming the offending key; the config keeps the bytes' SHA-256.
    ``escrow_required=False``: RNG mode without an auditor's key (a simulation's own)."""
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError("file", f"{source} is not UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("file", f"{source} is not valid TOML: {exc}") from exc
    except RecursionError:  # tomllib recurses into each nested list and inline table
        raise ConfigError(
            "file", f"{source} nests lists or tables deeper than {MAX_NESTING}"
        ) from None
    except ValueError:  # an integer of more digits than Python converts (4,300)
        raise ConfigError("file", f"{source} has a number too long to be one") from None
    config = parse_config(raw, escrow_required=escrow_required)
    return dataclasses.replace(config, source_sha256=hashlib.sha256(data).hexdigest())


def parse_config(raw: Mapping[str, Any], *, escrow_required: bool = True) -> Config:
    _check_shape(raw)
    sections: dict[str, Any] = {}
    for name, value in raw.items():
        if name in ("paytables", "limits"):
            continue
        cls = _SECTIONS.get(name)
        if cls is None:
            raise ConfigError(name, "unknown section")
        if not isinstance(value, dict):
            raise ConfigError(name, "must be a table")
        sections[name] = _section(name, cls, value)
    config = Config(**sections)
    if "paytables" in raw:
        config = dataclasses.replace(config, paytables=_paytables(raw["paytables"]))
    if "limits" in raw:
        limits = _limits(raw["limits"], config.paytables)
        config = dataclasses.replace(config, limits=limits)
    _check_pins_distinct(config.pins)
    _check_rules(config, raw)
    if config.shaker.cycles < config.round.min_shake_cycles:
        raise ConfigError(
            "round.min_shake_cycles",
            f"{config.round.min_shake_cycles} is more than the {config.shaker.cycles} cycles"
            " one shake pattern makes ([shaker] shake_ms / cycle_ms)",
        )
    config.round_settings()
    if escrow_required:
        require_escrow_key(config)
    return config


_MOVED = {"table.co_banking": "rules.co_banking"}


def _check_shape(raw: Mapping[str, Any]) -> None:
    """At most ``MAX_NESTING`` tables and lists within one another and ``MAX_KEYS`` keys and
    list items in all, before anything reads the values. Walked without recursion: a table
    header may nest as deep as the file is long."""
    keys = 0
    pending: list[tuple[str, Any, int]] = [("", raw, 0)]
    while pending:
        path, value, depth = pending.pop()
        if isinstance(value, dict):
            items: list[tuple[str, Any]] = [(str(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            items = [(f"[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        if depth > MAX_NESTING:
            raise ConfigError(path, f"nests lists or tables deeper than {MAX_NESTING}")
        keys += len(items)
        if keys > MAX_KEYS:
            raise ConfigError(path or "file", f"the file has more than {MAX_KEYS} keys and items")
        for name, item in items:
            child = f"{path}{name}" if name.startswith("[") else f"{path}.{name}" if path else name
            pending.append((child, item, depth + 1))


def _check_rules(config: Config, raw: Mapping[str, Any]) -> None:
    """What the table cannot honour is refused: a style of delivery at Pai Gow Poker, which
    deals cards (621a.9 is for tiles); co-banking without a player bank (621a.11(e),
    645a.12(e)); a side wager's limits on a table whose every mode is the RNG (current
    621a.5(e)(2)-(4): Sum, Match and Beat It are settled on the physical dice only)."""
    rules = raw.get("rules", {})
    if config.table.game is Game.POKER and rules.get("delivery_styles"):
        raise ConfigError(
            "rules.delivery_styles",
            "Pai Gow Poker has no styles of delivery (621a.9 is for tiles): leave it out",
        )
    if config.rules.co_banking and not config.rules.player_bank:
        raise ConfigError(
            "rules.co_banking", "co-banking is for a player bank, and rules.player_bank is false"
        )
    modes = {config.table.mode, *config.table.modes}
    if modes == {Mode.RNG} and config.limits is not None:
        for name in config.limits.configured():
            if name != "table":
                raise ConfigError(
                    f"limits.{name}",
                    f"every mode of this table is the RNG: its {name} wager is settled on"
                    " the physical dice only (current 621a.5(e)(2)-(4))",
                )


def _check_pins_distinct(pins: PinsConfig) -> None:
    seen: dict[int, str] = {}
    for spec in dataclasses.fields(pins):
        number = getattr(pins, spec.name)
        if number in seen:
            raise ConfigError(f"pins.{spec.name}", f"BCM {number} is already pins.{seen[number]}")
        seen[number] = spec.name


def _section(name: str, cls: type[Any], values: Mapping[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        spec = known.get(key)
        if spec is None:
            moved = _MOVED.get(f"{name}.{key}")
            if moved is not None:
                raise ConfigError(f"{name}.{key}", f"is now {moved} (the Rules Submission)")
            raise ConfigError(f"{name}.{key}", "unknown key")
        kwargs[key] = _value(f"{name}.{key}", hints[key], spec.metadata, value)
    return cls(**kwargs)


def _value(key: str, kind: Any, meta: Mapping[str, Any], value: Any) -> Any:  # noqa: C901 - input validator
    if typing.get_origin(kind) is tuple:  # tuple[SomeEnum, ...]: a list of distinct choices
        item = typing.get_args(kind)[0]
        choices = [str(m.value) for m in item]
        if not isinstance(value, list) or len(value) > len(choices):
            raise ConfigError(key, f"must be a list of {', '.join(choices)}")
        items = tuple(_value(key, item, {}, v) for v in value)
        if len(set(items)) != len(items):
            raise ConfigError(key, "names a choice twice")
        return items
    if isinstance(kind, type) and issubclass(kind, Enum):
        choices = [str(m.value) for m in kind]
        if not isinstance(value, str) or value not in choices:
            raise ConfigError(key, f"must be one of {', '.join(choices)}")
        return kind(value)
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(key, "must be true or false")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(key, "must be a whole number")
    elif kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(key, "must be a number")
        try:
            value = float(value)
        except OverflowError:  # an integer past the largest float (1e308)
            raise ConfigError(
                key, f"is out of range {meta.get('low')}..{meta.get('high')}"
            ) from None
        if not math.isfinite(value):  # nan passes every comparison with a bound
            raise ConfigError(key, f"{value} is not a finite number")
    elif kind is str:
        if not isinstance(value, str):
            raise ConfigError(key, "must be a string")
        if not value and not meta.get("may_be_empty"):
            raise ConfigError(key, "must be a non-empty string")
        most = meta.get("max_chars", MAX_TEXT_CHARS)
        # isprintable(): no control, format (bidi overrides, zero-width) or separator
        # characters but the plain space
        if len(value) > most or not value.isprintable():
            raise ConfigError(
                key, f"must be at most {most} characters, none of them control characters"
            )
        if meta.get("pattern") == "name" and not _is_name(value):
            raise ConfigError(key, "must be 1-32 letters, digits, '-' or '_'")
        return value
    else:  # pragma: no cover - a section declared a type this loader does not know
        raise ConfigError(key, f"has unsupported type {kind}")
    low, high = meta.get("low"), meta.get("high")
    if (low is not None and value < low) or (high is not None and value > high):
        # an integer past 64 bits is not written out (past 4,300 digits str() itself fails)
        shown = value if isinstance(value, float) or value.bit_length() <= 64 else "a number"
        raise ConfigError(key, f"{shown} is out of range {low}..{high}")
    allowed = meta.get("choices")
    if allowed is not None and value not in allowed:
        raise ConfigError(key, f"must be one of {', '.join(str(c) for c in allowed)}")
    return value


def _is_name(value: str) -> bool:
    return 1 <= len(value) <= 32 and all(c.isascii() and (c.isalnum() or c in "-_") for c in value)


def _paytables(raw: Any) -> tuple[Paytable, ...]:
    """``[paytables.NAME]`` tables: wager, condition (sum and beat_it), pays = {key = "N to M"}.

    Every outcome the table can produce must have its odds: a payout is never invented."""
    if not isinstance(raw, dict):
        raise ConfigError("paytables", "must be a table of named paytables")
    tables = []
    for name, spec in raw.items():
        key = f"paytables.{name}"
        if not _is_name(name):
            raise ConfigError(key, "a paytable name must be 1-32 letters, digits, '-' or '_'")
        if not isinstance(spec, dict):
            raise ConfigError(key, "must be a table")
        unknown = set(spec) - {"wager", "condition", "pays"}
        if unknown:
            raise ConfigError(f"{key}.{sorted(unknown)[0]}", "unknown key")
        wager = _value(f"{key}.wager", Wager, {}, spec.get("wager"))
        condition: str | None = None
        if wager is Wager.SUM:
            condition = str(_value(f"{key}.condition", SumCondition, {}, spec.get("condition")))
        elif wager is Wager.BEAT_IT:
            condition = str(_value(f"{key}.condition", BeatItCondition, {}, spec.get("condition")))
        elif "condition" in spec:
            raise ConfigError(f"{key}.condition", "a match paytable has no condition")
        pays_raw = spec.get("pays")
        if not isinstance(pays_raw, dict) or not pays_raw:
            raise ConfigError(f"{key}.pays", 'must map outcomes to odds, e.g. { "17" = "25 to 1" }')
        pays = {str(k): _odds(f"{key}.pays.{k}", v) for k, v in pays_raw.items()}
        table = Paytable(name, wager, condition, pays)
        possible = table.possible_keys()
        for outcome in pays:
            if outcome not in possible:
                raise ConfigError(
                    f"{key}.pays.{outcome}",
                    f"is not an outcome of this wager (outcomes: {', '.join(sorted(possible))})",
                )
        for outcome in sorted(possible - set(pays)):
            raise ConfigError(f"{key}.pays.{outcome}", "missing: every winning outcome needs odds")
        tables.append(table)
    return tuple(tables)


def _odds(key: str, value: Any) -> Odds:
    if not isinstance(value, str):
        raise ConfigError(key, 'must be a string like "25 to 1"')
    parts = value.split()
    if len(parts) != 3 or parts[1] != "to" or not all(map(is_ascii_digits, parts[::2])):
        raise ConfigError(key, f'{quoted(value)} is not odds like "25 to 1"')
    try:
        win = parse_bounded_int(parts[0], low=1, high=ODDS_WIN_MAX, what="the win")
        stake = parse_bounded_int(parts[2], low=1, high=ODDS_STAKE_MAX, what="the stake")
    except ValueError as exc:
        raise ConfigError(key, f"{quoted(value)} is out of range: {exc}") from None
    return Odds(win, stake)


def _limits(raw: Any, paytables: tuple[Paytable, ...]) -> LimitsConfig:  # noqa: C901 - input validator
    """``[limits]``: ``currency``, and ``[limits.table]``, ``[limits.sum]``, ``[limits.match]``,
    ``[limits.beat_it]`` each with whole-unit ``min`` and ``max``. A side wager's limits need
    a paytable of that wager: the page never shows limits for a wager the table cannot pay."""
    if not isinstance(raw, dict):
        raise ConfigError("limits", "must be a table")
    known = ("currency", *LIMIT_WAGERS)
    for key in raw:
        if key not in known:
            raise ConfigError(f"limits.{key}", f"unknown key (keys: {', '.join(known)})")
    currency = raw.get("currency", "USD")
    if not (
        isinstance(currency, str) and len(currency) == 3 and all("A" <= c <= "Z" for c in currency)
    ):
        raise ConfigError("limits.currency", 'must be three capital letters (ISO 4217), e.g. "USD"')
    offered = {str(table.wager) for table in paytables}
    wagers: dict[str, BetLimits] = {}
    for name in LIMIT_WAGERS:
        if name not in raw:
            continue
        key = f"limits.{name}"
        spec = raw[name]
        if not isinstance(spec, dict):
            raise ConfigError(key, "must be a table with min and max")
        for extra in spec:
            if extra not in ("min", "max"):
                raise ConfigError(f"{key}.{extra}", "unknown key (keys: min, max)")
        bounds = {}
        for end in ("min", "max"):
            if end not in spec:
                raise ConfigError(f"{key}.{end}", "missing: a wager's limits have min and max")
            bounds[end] = _value(f"{key}.{end}", int, _range(1, LIMIT_MAX), spec[end])
        if bounds["max"] < bounds["min"]:
            raise ConfigError(f"{key}.max", f"{bounds['max']} is below {key}.min ({bounds['min']})")
        if name != "table" and name not in offered:
            raise ConfigError(key, f"the table offers no {name} wager (no paytable of it)")
        wagers[name] = BetLimits(bounds["min"], bounds["max"])
    return LimitsConfig(currency=currency, **wagers)
