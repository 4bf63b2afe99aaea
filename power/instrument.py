"""Yokogawa WT300-series analyzers (WT310, WT310E, WT333E) over pyvisa: the only pyvisa user.

The driver reads voltage, current, active power and power factor, sets fixed or automatic
ranges (a requested value is rounded up to the next range the model has) and estimates the
uncertainty of a reading from the datasheet accuracy. `open_analyzer` opens a real instrument
by VISA resource string, or a pyvisa-sim instrument from the YAML shipped next to this module.

The simulated instruments answer idle readings on numeric items 1-4 and loaded readings on
items 5-8 (pyvisa-sim replies are static apart from one RANDOM per reply), so a load hint
(`set_load`) picks the bank the driver reads; a real instrument only ever reads items 1-4.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path

import pyvisa
import pyvisa.errors

from lab.errors import PowerError

SIM_DIR = Path(__file__).resolve().parent
ITEM_FUNCTIONS = ("U", "I", "P", "LAMBDA")  # volts, amps, watts, power factor
INVALID_ABOVE = 9.9e37  # the instrument's "over range / no data" value is 9.91E+37
TIMEOUT_MS = 5000


class AnalyzerError(PowerError):
    """The analyzer refused a setting or stopped answering."""


class AnalyzerLost(AnalyzerError):
    """The analyzer stopped answering (cable pulled, powered off, USB reset)."""


@dataclass(frozen=True)
class ModelSpec:
    """What a model offers: ranges at crest factor 3, and its power accuracy at 45-66 Hz."""

    name: str
    device_types: tuple[int, ...]  # PTDaemon device type numbers
    volts_ranges: tuple[float, ...]
    amps_ranges: tuple[float, ...]
    reading_frac: float  # accuracy: fraction of reading
    range_frac: float  # ... plus fraction of the power range (V range x A range)
    pf0_frac: float  # influence at power factor 0, as a fraction of apparent power
    elements: int = 1

    @property
    def ptd_name(self) -> str:
        """The model name PTDaemon puts first in its Identify reply."""
        return f"Yokogawa{self.name}"


_VOLTS = (15.0, 30.0, 60.0, 150.0, 300.0, 600.0)
_AMPS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
# Accuracy from the user manuals (IM WT310-02EN, IM WT310E-02EN, section 7.3 "Active Power
# Accuracy"): the E models are +-(0.1 % of reading + 0.05 % of range) at 45-66 Hz.
MODELS: dict[str, ModelSpec] = {
    "WT310": ModelSpec("WT310", (49, 549), _VOLTS, _AMPS, 0.001, 0.001, 0.002),
    "WT310E": ModelSpec("WT310E", (49, 549), _VOLTS, _AMPS, 0.001, 0.0005, 0.001),
    "WT333E": ModelSpec("WT333E", (52, 586), _VOLTS, _AMPS[6:], 0.001, 0.0005, 0.001, 3),
}
DEFAULT_MODEL_FOR_TYPE = {49: "WT310E", 549: "WT310E", 52: "WT333E", 586: "WT333E"}


def round_up_range(value: float, ranges: tuple[float, ...], quantity: str, model: str) -> float:
    """The smallest range that holds value; raises AnalyzerError above the largest."""
    if not math.isfinite(value) or value <= 0:
        raise AnalyzerError(f"A {quantity} range of {value!r} is not a positive number.")
    for candidate in ranges:
        if value <= candidate * (1 + 1e-9):
            return candidate
    unit = "V" if quantity == "voltage" else "A"
    raise AnalyzerError(f"A {quantity} range of {value:g} {unit} is above the largest range of "
                        f"the {model} ({ranges[-1]:g} {unit}).")


@dataclass(frozen=True)
class Reading:
    """One set of values read from the analyzer; NaN marks an invalid (over-range) value."""

    volts: float
    amps: float
    watts: float
    pf: float


@dataclass(frozen=True)
class RangeState:
    """The analyzer's present ranges and whether each is automatic."""

    volts_auto: bool
    volts_range: float
    amps_auto: bool
    amps_range: float


def uncertainty_w(spec: ModelSpec, reading: Reading, ranges: RangeState) -> float:
    """Absolute uncertainty of the watts reading (datasheet formula for 0 < PF <= 1)."""
    apparent = reading.volts * reading.amps
    pf = min(abs(reading.pf), 1.0)
    if not (apparent > 0 and pf > 0 and math.isfinite(reading.watts)):
        return math.nan
    power_range = ranges.volts_range * ranges.amps_range
    tan_phi = math.sqrt(max(0.0, 1 - pf * pf)) / pf
    return abs(reading.watts) * (spec.reading_frac + spec.range_frac * power_range / apparent
                                 + tan_phi * spec.pf0_frac)


class Analyzer:
    """A WT300-series analyzer behind an open pyvisa resource."""

    def __init__(self, resource: pyvisa.resources.MessageBasedResource, spec: ModelSpec,
                 *, simulated: bool, element: int = 1) -> None:
        self.resource = resource
        self.spec = spec
        self.simulated = simulated
        self.element = element
        self.name = str(resource.resource_name)
        self._bank = 0
        self.idn = ""

    def configure(self) -> str:
        """Select ASCII numeric output and the items read; returns the `*IDN?` identity."""
        self.idn = self._query("*IDN?")
        model = self.idn.split(",")[1].strip() if "," in self.idn else ""
        if model != self.spec.name:
            raise AnalyzerError(f"The instrument at {self.name} is a {model or self.idn!r}, not "
                                f"the {self.spec.name} configured; fix `model:` in hosts.yaml.")
        banks = 2 if self.simulated else 1
        self._write("*CLS")
        self._write(":COMMUNICATE:HEADER OFF")
        self._write(":NUMERIC:FORMAT ASCII")
        self._write(f":NUMERIC:NORMAL:NUMBER {4 * banks}")
        for i in range(4 * banks):
            self._write(f":NUMERIC:NORMAL:ITEM{i + 1} {ITEM_FUNCTIONS[i % 4]},{self.element}")
        self._check_errors("configuring the numeric items")
        return self.idn

    def read(self) -> Reading:
        """Volts, amps, watts and power factor, one item per query."""
        values = [self._value(self._bank + i + 1) for i in range(4)]
        return Reading(*values)

    def ranges(self) -> RangeState:
        """The present ranges and auto-range flags."""
        return RangeState(
            volts_auto=self._query(":INPUT:VOLTAGE:AUTO?").strip() in ("1", "ON"),
            volts_range=self._number(":INPUT:VOLTAGE:RANGE?"),
            amps_auto=self._query(":INPUT:CURRENT:AUTO?").strip() in ("1", "ON"),
            amps_range=self._number(":INPUT:CURRENT:RANGE?"),
        )

    def set_range(self, quantity: str, value: float | None) -> float | None:
        """Fix the voltage or current range (rounded up), or make it automatic with None."""
        node = {"voltage": "VOLTAGE", "current": "CURRENT"}[quantity]
        if value is None:
            self._write(f":INPUT:{node}:AUTO 1")
            self._check_errors(f"turning {quantity} auto-range on")
            return None
        table = self.spec.volts_ranges if quantity == "voltage" else self.spec.amps_ranges
        chosen = round_up_range(value, table, quantity, self.spec.name)
        self._write(f":INPUT:{node}:AUTO 0")
        self._write(f":INPUT:{node}:RANGE {chosen:g}")
        self._check_errors(f"setting the {quantity} range to {chosen:g}")
        return chosen

    def set_load(self, busy: bool) -> None:
        """Pick the simulated load profile; a real instrument measures what it measures."""
        if not self.simulated:
            raise AnalyzerError(f"The analyzer at {self.name} is real; a load hint only "
                                "applies to a simulated instrument.")
        self._bank = 4 if busy else 0

    def close(self) -> None:
        """Release the instrument."""
        with contextlib.suppress(pyvisa.errors.Error):
            self.resource.close()

    def _value(self, item: int) -> float:
        text = self._query(f":NUMERIC:NORMAL:VALUE? {item}").strip()
        try:
            value = float(text)
        except ValueError:
            return math.nan
        return math.nan if abs(value) >= INVALID_ABOVE else value

    def _number(self, query: str) -> float:
        text = self._query(query).strip()
        try:
            return float(text)
        except ValueError as e:
            raise AnalyzerError(f"The analyzer at {self.name} answered {query!r} with "
                                f"{text!r}, which is not a number.") from e

    def _check_errors(self, doing: str) -> None:
        esr = int(self._query("*ESR?").strip() or 0)
        if esr & (32 | 16 | 4):  # command, execution or query error
            raise AnalyzerError(f"The analyzer at {self.name} refused a command while {doing} "
                                f"(*ESR? = {esr}).")

    def _query(self, command: str) -> str:
        try:
            return str(self.resource.query(command))
        except (pyvisa.errors.Error, OSError, ValueError) as e:
            raise AnalyzerLost(f"The analyzer at {self.name} did not answer {command!r}: "
                                f"{e}. Check its cable and power.") from e

    def _write(self, command: str) -> None:
        try:
            self.resource.write(command)
        except (pyvisa.errors.Error, OSError, ValueError) as e:
            raise AnalyzerLost(f"The analyzer at {self.name} did not take {command!r}: "
                                f"{e}. Check its cable and power.") from e


def sim_file(model: str) -> Path:
    """The shipped pyvisa-sim definition of a model."""
    return SIM_DIR / f"{model.lower()}.yaml"


def open_analyzer(model: str, resource: str, *, sim_path: Path | None = None,
                  visa_library: str = "", element: int = 1) -> Analyzer:
    """Open and configure an analyzer: `sim` for the simulator, else a VISA resource string."""
    spec = MODELS.get(model)
    if spec is None:
        raise AnalyzerError(f"Analyzer model {model!r} is not supported; use one of "
                            f"{', '.join(MODELS)}.")
    simulated = resource == "sim"
    library = f"{sim_path or sim_file(model)}@sim" if simulated else visa_library
    try:
        manager = pyvisa.ResourceManager(library)
        name = _sim_resource(manager) if simulated else _resolve(manager, resource)
        handle = manager.open_resource(name, read_termination="\n", write_termination="\n",
                                       timeout=TIMEOUT_MS)
    except (pyvisa.errors.Error, OSError, ValueError) as e:
        hint = ("check the pyvisa-sim file" if simulated else
                "check the resource string, the cable, and that a VISA library is installed")
        raise AnalyzerError(f"Could not open the {model} at {resource!r} "
                            f"({library or 'default VISA library'}): {e}; {hint}.") from e
    analyzer = Analyzer(handle, spec, simulated=simulated, element=element)  # type: ignore[arg-type]
    try:
        analyzer.configure()
    except AnalyzerError:
        analyzer.close()
        raise
    return analyzer


def _sim_resource(manager: pyvisa.ResourceManager) -> str:
    names = manager.list_resources()
    if not names:
        raise ValueError("the simulation file defines no resources")
    return str(names[0])


def _resolve(manager: pyvisa.ResourceManager, resource: str) -> str:
    """A full resource string as given, or the instrument whose serial number is resource."""
    if "::" in resource:
        return resource
    for name in manager.list_resources():
        if f"::{resource}::" in name:
            return str(name)
    raise ValueError(f"no instrument with serial number {resource!r} is connected")
