"""The model-client layer: one ChatModel interface over a real endpoint or the offline demo."""

from .demo_model import DemoChatModel
from .factory import build_chat_model
from .openai_model import OpenAIChatModel
from .types import ChatModel, FailedAttempt, ModelError, ModelReply, ToolCall, Usage

__all__ = [
    "ChatModel",
    "DemoChatModel",
    "FailedAttempt",
    "ModelError",
    "ModelReply",
    "OpenAIChatModel",
    "ToolCall",
    "Usage",
    "build_chat_model",
]
