"""What a judged case leaves behind: its row and report folder (recording.py), the report
model and its sections rendered through templates/ (report.py, report_sections.py), the
lane picture, the failure class that claims a report slot, and the remap's part of a
run's summary (summary.py, speed_table.py). Imports the case, the judge and the grid."""
