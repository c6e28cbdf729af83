"""Drawings and notebook display: timelines, tables, SASS excerpts."""
