"""Pure, typed core of mtpwatch: parsing, rates, clients, models. Never imports Textual or Rich."""
