"""The Docker engine seam: the only package that imports the docker SDK.

Small verbs over one client (build, inspect, create, start, logs, wait, stop, remove); callers pass
plain data (dicts of create arguments, tar bytes) and get plain data back, so nothing else needs the
SDK. Every SDK or connection error leaves through one translation point (`_translate`) as a typed
EnvironmentProblem that says what to do (`_errors`): EngineUnavailable, ImageMissing (BaseImageMissing),
PullFailed, BuildFailed, ContainerFailed (GpuUnavailable), LoadFailed, or RequestFailed when nothing
narrower fits. Callers that act on a cause catch its type; those that only report catch
EnvironmentProblem.

    _client      Engine, connect, engine_available
    _images      image verbs (exists, inspect, list, pull, build, remove) and ImageInfo
    _containers  container verbs (create, start, logs, wait, stop, kill, inspect, remove, list)
    _archives    docker save / docker load
"""

from reprobox.engine._archives import load_image, save_image
from reprobox.engine._client import Engine, connect, engine_available
from reprobox.engine._errors import BuildFailed, EngineUnavailable, GpuUnavailable
from reprobox.engine._images import ImageInfo

__all__ = [
    "BuildFailed",
    "Engine",
    "EngineUnavailable",
    "GpuUnavailable",
    "ImageInfo",
    "connect",
    "engine_available",
    "load_image",
    "save_image",
]
