"""Image pins (`images` in the project config): the version in every pin's tag
must agree, on `images.version` when set, else with each other, unless a pin
declares its own `version` (an LTS base). An `image` set directly in `systems`
or `targets` bypasses the pins, so it is checked the same way."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from msgspec import Struct

from matrixgen.documents.config import ProjectConfig
from matrixgen.documents.config_sections import ImageSet
from matrixgen.model.errors import Finding, finding
from matrixgen.model.vocab import System
from matrixgen.util.values import JsonLayout

if TYPE_CHECKING:
    from matrixgen.engine.context import ValidationContext

# 26.09, 25.10, ...: the release a base image tag is named after.
DEFAULT_VERSION_PATTERN = r"(\d{2}\.\d{2})"
ARCHES = ("amd64", "arm64")


class ImagePin(Struct, frozen=True, kw_only=True):
    """One pinned image, where the config holds it."""

    keys: tuple[str, ...]  # path in the config, e.g. ("images", "gitlab", "amd64")
    system: str
    environment: str | None  # None: every environment without its own pin
    arch: str | None  # None: every architecture
    repository: str
    tag: str
    declared: str | None = None  # the pin's own version, when it differs on purpose

    @property
    def name(self) -> str:
        """How reports call it: github, gitlab/amd64, environments/lts/gitlab/amd64, ..."""
        return "/".join(self.keys[1:]) if self.keys[0] == "images" else ".".join(self.keys)

    @property
    def image(self) -> str:
        return f"{self.repository}:{self.tag}" if self.tag else self.repository


class ImageStatus(Struct, frozen=True, kw_only=True):
    """One pin with the version read from its tag and what it should be."""

    pin: ImagePin
    version: str | None
    expected: str | None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    # Its JSON (`matrixgen pins --format json`): the pin, its version, whether it holds.
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            *((k, f"pin.{k}") for k in ("name", "system", "environment", "arch", "image")),
            *((k, k) for k in ("version", "expected", "ok", "problem")),
        )
    )


def _pin_set(
    value: ImageSet | None, keys: tuple[str, ...], system: str, environment: str | None
) -> Iterator[ImagePin]:
    """The pin of every architecture, or each architecture's."""
    for arch, pin in value.pins().items() if value is not None else ():
        yield ImagePin(
            keys=(*keys, arch) if arch else keys,
            system=system,
            environment=environment,
            arch=arch or None,
            repository=pin.repository,
            tag=pin.tag,
            declared=pin.version,
        )


def _split_image(text: str) -> tuple[str, str]:
    """repository:tag; a ':' before the last '/' is a registry port, not a tag."""
    slash = text.rfind("/")
    colon = text.rfind(":")
    if colon > slash:
        return text[:colon], text[colon + 1 :]
    return text, ""


def image_pins(config: ProjectConfig) -> list[ImagePin]:
    """Every image the config pins, in config order, settings overrides last."""
    images = config.doc.images
    pins: list[ImagePin] = []
    for system in System:
        pins.extend(_pin_set(images.of(system), ("images", system), system, None))
    for env in sorted(images.environments):
        per_env = images.environments[env]
        for system in System:
            keys = ("images", "environments", env, system)
            pins.extend(_pin_set(per_env.of(system), keys, system, env))
    # An `image` in the system's or a target's settings wins over the pins: check it too.
    for system in System:
        settings = config.doc.systems.of(system)
        if settings is not None and settings.image is not None:
            pins.append(_settings_pin(("systems", system), settings.image, system, None))
    for name, spec in sorted(config.doc.targets.items()):
        if spec.image is not None:
            where = ("targets", name)
            pins.append(_settings_pin(where, spec.image, spec.system, spec.environment))
    return pins


def _settings_pin(where: tuple[str, str], image: str, system: str, env: str | None) -> ImagePin:
    """The `image` of a system's or a target's settings, every architecture."""
    repo, tag = _split_image(image)
    return ImagePin(
        keys=(*where, "image"), system=system, environment=env, arch=None, repository=repo, tag=tag
    )


def version_pattern(config: ProjectConfig) -> re.Pattern[str] | None:
    """The configured pattern, or None when it does not compile."""
    text = config.doc.images.version_pattern or DEFAULT_VERSION_PATTERN
    try:
        return re.compile(text)
    except re.error:
        return None


def version_of(tag: str, pattern: re.Pattern[str]) -> str | None:
    """The version a tag is named after: the pattern's first group (or whole match)."""
    match = pattern.search(tag)
    if match is None:
        return None
    return match.group(1) if pattern.groups else match.group(0)


def image_status(config: ProjectConfig) -> list[ImageStatus]:
    """Each pin with its version and, when it disagrees, what is wrong."""
    pins = image_pins(config)
    pattern = version_pattern(config)
    if pattern is None:
        return [ImageStatus(pin=p, version=None, expected=None) for p in pins]
    versions = {p.keys: version_of(p.tag, pattern) for p in pins}
    expected = config.doc.images.version
    reference = ""
    if expected is None:
        # No version configured: the pins must agree with each other; the most
        # common version (first seen on a tie) is the one the others are told about.
        seen = [versions[p.keys] for p in pins if p.declared is None and versions[p.keys]]
        if seen:
            counts = Counter(seen)
            expected = max(seen, key=lambda v: (counts[v], -seen.index(v)))
            holders = [p.name for p in pins if p.declared is None and versions[p.keys] == expected]
            reference = f" like {', '.join(holders)}"
    else:
        reference = " (images.version)"
    out: list[ImageStatus] = []
    for pin in pins:
        version = versions[pin.keys]
        want = pin.declared if pin.declared is not None else expected
        problem = None
        if version is None:
            problem = (
                f'image {pin.name} ({pin.image}): no version in tag "{pin.tag}" '
                f"(version_pattern {pattern.pattern})"
            )
        elif want is not None and version != want:
            if pin.declared is not None:
                problem = (
                    f"image {pin.name} ({pin.image}) declares version {pin.declared} "
                    f"but its tag is {version}"
                )
            else:
                problem = (
                    f"image {pin.name} ({pin.image}) is on {version}, "
                    f"the pins are on {want}{reference}: drift between pins is a bug"
                )
        out.append(ImageStatus(pin=pin, version=version, expected=want, problem=problem))
    return out


def check_images(context: ValidationContext) -> Iterator[Finding]:
    """validate: image pins agree; every configured target has an image for its arch."""
    config = context.tree.config
    images = config.doc.images
    if images.version_pattern is not None and version_pattern(config) is None:
        yield finding(
            config.locate(["images", "version_pattern"]),
            "pin-image",
            "images.version_pattern is not a valid regular expression: " + images.version_pattern,
        )
        return
    for status in image_status(config):
        if status.problem is not None:
            keys = list(status.pin.keys)
            where = [*keys, "tag"] if keys[0] == "images" else keys
            yield finding(config.locate(where), "pin-image", status.problem)
    if images == type(images)():  # no images section
        return
    pins = [p for p in image_pins(config) if p.keys[0] == "images"]
    for target in config.targets:
        if target.settings.image is not None:
            continue
        platform = target.selector.platform or ""
        system = target.system.value
        arch = config.platform(platform).arch
        # A job runs in its environment's own pin, else the system's, for its arch.
        env = target.selector.environment
        if not any(
            p.system == system and p.arch in (None, arch) and p.environment in (None, env)
            for p in pins
        ):
            fix = (
                f"add images.{system}.{arch}"
                if arch in ARCHES
                else f"set platforms.{platform}.arch (amd64 or arm64)"
            )
            yield finding(
                config.locate(["targets", target.name]),
                "pin-image",
                f'target "{target.name}": no image pinned for {system} on {platform} '
                f"({arch or 'no arch'}): {fix}",
            )
