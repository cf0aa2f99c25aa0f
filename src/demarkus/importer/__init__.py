"""`demarkus import`: a user's own markdown folder (and its git history) into a store."""

from .apply import FileResult, Outcome, Source, Target, Version, archive_document, import_file
from .folder import Scan, Summary, import_folder, scan_folder
from .history import GitHistory, find_repository
from .note import Note, document_path, parse_note

__all__ = [
    "FileResult",
    "GitHistory",
    "Note",
    "Outcome",
    "Scan",
    "Source",
    "Summary",
    "Target",
    "Version",
    "archive_document",
    "document_path",
    "find_repository",
    "import_file",
    "import_folder",
    "parse_note",
    "scan_folder",
]
