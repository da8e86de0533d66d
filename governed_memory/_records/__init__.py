"""_records"""
