"""Shipped seed projects (pinned sdists + seeds.json); read by touchstone.tasks.seeding."""
