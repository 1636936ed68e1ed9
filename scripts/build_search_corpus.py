"""Builds the shipped QA fixture (``corpus.jsonl``, ``questions.jsonl``) from hand-checked fact tables.

Run ``python scripts/build_search_corpus.py`` to regenerate. Facts are well known and stated
plainly; passages are written so that multi-hop questions need two searches (a person's passage names the
birth country but never its capital or currency, which live in the country's passage).
"""

from __future__ import annotations

import json
from pathlib import Path

# country: (capital, continent, currency, official language(s) or "")
COUNTRIES: dict[str, tuple[str, str, str, str]] = {
    "France": ("Paris", "Europe", "euro", "French"),
    "Germany": ("Berlin", "Europe", "euro", "German"),
    "Italy": ("Rome", "Europe", "euro", "Italian"),
    "Spain": ("Madrid", "Europe", "euro", "Spanish"),
    "Portugal": ("Lisbon", "Europe", "euro", "Portuguese"),
    "United Kingdom": ("London", "Europe", "pound sterling", "English"),
    "Ireland": ("Dublin", "Europe", "euro", "Irish and English"),
    "Netherlands": ("Amsterdam", "Europe", "euro", "Dutch"),
    "Belgium": ("Brussels", "Europe", "euro", "Dutch, French and German"),
    "Switzerland": ("Bern", "Europe", "Swiss franc", "German, French, Italian and Romansh"),
    "Austria": ("Vienna", "Europe", "euro", "German"),
    "Poland": ("Warsaw", "Europe", "zloty", "Polish"),
    "Czech Republic": ("Prague", "Europe", "Czech koruna", "Czech"),
    "Hungary": ("Budapest", "Europe", "forint", "Hungarian"),
    "Croatia": ("Zagreb", "Europe", "euro", "Croatian"),
    "Sweden": ("Stockholm", "Europe", "Swedish krona", "Swedish"),
    "Norway": ("Oslo", "Europe", "Norwegian krone", "Norwegian"),
    "Denmark": ("Copenhagen", "Europe", "Danish krone", "Danish"),
    "Finland": ("Helsinki", "Europe", "euro", "Finnish and Swedish"),
    "Greece": ("Athens", "Europe", "euro", "Greek"),
    "Russia": ("Moscow", "Europe and Asia", "Russian ruble", "Russian"),
    "Ukraine": ("Kyiv", "Europe", "hryvnia", "Ukrainian"),
    "Turkey": ("Ankara", "Asia and Europe", "Turkish lira", "Turkish"),
    "Egypt": ("Cairo", "Africa", "Egyptian pound", "Arabic"),
    "Nigeria": ("Abuja", "Africa", "naira", "English"),
    "Kenya": ("Nairobi", "Africa", "Kenyan shilling", "Swahili and English"),
    "Tanzania": ("Dodoma", "Africa", "Tanzanian shilling", "Swahili and English"),
    "South Africa": ("Pretoria", "Africa", "rand", ""),
    "Ethiopia": ("Addis Ababa", "Africa", "birr", "Amharic"),
    "Morocco": ("Rabat", "Africa", "Moroccan dirham", "Arabic and Berber"),
    "Ghana": ("Accra", "Africa", "cedi", "English"),
    "China": ("Beijing", "Asia", "renminbi", "Mandarin Chinese"),
    "Japan": ("Tokyo", "Asia", "yen", "Japanese"),
    "South Korea": ("Seoul", "Asia", "South Korean won", "Korean"),
    "India": ("New Delhi", "Asia", "Indian rupee", "Hindi and English"),
    "Pakistan": ("Islamabad", "Asia", "Pakistani rupee", "Urdu and English"),
    "Nepal": ("Kathmandu", "Asia", "Nepalese rupee", "Nepali"),
    "Indonesia": ("Jakarta", "Asia", "rupiah", "Indonesian"),
    "Thailand": ("Bangkok", "Asia", "baht", "Thai"),
    "Vietnam": ("Hanoi", "Asia", "dong", "Vietnamese"),
    "Philippines": ("Manila", "Asia", "Philippine peso", "Filipino and English"),
    "Iran": ("Tehran", "Asia", "Iranian rial", "Persian"),
    "Saudi Arabia": ("Riyadh", "Asia", "Saudi riyal", "Arabic"),
    "United States": ("Washington, D.C.", "North America", "United States dollar", ""),
    "Canada": ("Ottawa", "North America", "Canadian dollar", "English and French"),
    "Mexico": ("Mexico City", "North America", "Mexican peso", ""),
    "Cuba": ("Havana", "North America", "Cuban peso", "Spanish"),
    "Jamaica": ("Kingston", "North America", "Jamaican dollar", "English"),
    "Brazil": ("Brasilia", "South America", "Brazilian real", "Portuguese"),
    "Argentina": ("Buenos Aires", "South America", "Argentine peso", "Spanish"),
    "Chile": ("Santiago", "South America", "Chilean peso", "Spanish"),
    "Peru": ("Lima", "South America", "sol", "Spanish, Quechua and Aymara"),
    "Colombia": ("Bogota", "South America", "Colombian peso", "Spanish"),
    "Venezuela": ("Caracas", "South America", "bolivar", "Spanish"),
    "Australia": ("Canberra", "Oceania", "Australian dollar", ""),
    "New Zealand": ("Wellington", "Oceania", "New Zealand dollar", ""),
}

# name: (short name, birth year, birth place, region or "", country, what they did)
PEOPLE: dict[str, tuple[str, int, str, str, str, str]] = {
    "Albert Einstein": (
        "Einstein",
        1879,
        "Ulm",
        "",
        "Germany",
        "was a theoretical physicist who developed the theory of relativity",
    ),
    "Marie Curie": (
        "Curie",
        1867,
        "Warsaw",
        "",
        "Poland",
        "was a physicist and chemist who discovered the elements polonium and radium with Pierre Curie; "
        "she named polonium after her homeland and was the first person to win two Nobel Prizes",
    ),
    "Isaac Newton": (
        "Newton",
        1643,
        "Woolsthorpe",
        "England",
        "United Kingdom",
        "was a mathematician and physicist who formulated the laws of motion and universal gravitation",
    ),
    "Galileo Galilei": (
        "Galileo",
        1564,
        "Pisa",
        "",
        "Italy",
        "was an astronomer who observed the four largest moons of Jupiter with a telescope",
    ),
    "Charles Darwin": (
        "Darwin",
        1809,
        "Shrewsbury",
        "England",
        "United Kingdom",
        "was a naturalist who proposed the theory of evolution by natural selection",
    ),
    "Nikola Tesla": (
        "Tesla",
        1856,
        "Smiljan",
        "",
        "Croatia",
        "was an inventor and engineer known for his work on alternating current electricity",
    ),
    "Wolfgang Amadeus Mozart": (
        "Mozart",
        1756,
        "Salzburg",
        "",
        "Austria",
        "was a composer of the Classical period who wrote more than 600 works",
    ),
    "Ludwig van Beethoven": (
        "Beethoven",
        1770,
        "Bonn",
        "",
        "Germany",
        "was a composer and pianist who kept composing after he lost his hearing",
    ),
    "Johann Sebastian Bach": ("Bach", 1685, "Eisenach", "", "Germany", "was a composer of the Baroque period"),
    "Frederic Chopin": (
        "Chopin",
        1810,
        "Zelazowa Wola",
        "",
        "Poland",
        "was a composer and pianist famous for his works for solo piano",
    ),
    "Pablo Picasso": ("Picasso", 1881, "Malaga", "", "Spain", "was a painter and sculptor who co-founded Cubism"),
    "Vincent van Gogh": (
        "Van Gogh",
        1853,
        "Zundert",
        "",
        "Netherlands",
        "was a Post-Impressionist painter who made about 2,100 artworks",
    ),
    "Leonardo da Vinci": (
        "Leonardo",
        1452,
        "Vinci",
        "",
        "Italy",
        "was a painter, engineer and scientist of the Italian Renaissance",
    ),
    "Michelangelo": (
        "Michelangelo",
        1475,
        "Caprese",
        "",
        "Italy",
        "was a sculptor and painter who painted the ceiling of the Sistine Chapel",
    ),
    "William Shakespeare": (
        "Shakespeare",
        1564,
        "Stratford-upon-Avon",
        "England",
        "United Kingdom",
        "was a playwright and poet, widely regarded as the greatest writer in the English language",
    ),
    "Jane Austen": (
        "Austen",
        1775,
        "Steventon",
        "England",
        "United Kingdom",
        "was a novelist known for her novels about the English landed gentry",
    ),
    "Charles Dickens": (
        "Dickens",
        1812,
        "Portsmouth",
        "England",
        "United Kingdom",
        "was a novelist of the Victorian era",
    ),
    "Leo Tolstoy": ("Tolstoy", 1828, "Yasnaya Polyana", "", "Russia", "was a novelist"),
    "Fyodor Dostoevsky": ("Dostoevsky", 1821, "Moscow", "", "Russia", "was a novelist who wrote Crime and Punishment"),
    "Miguel de Cervantes": ("Cervantes", 1547, "Alcala de Henares", "", "Spain", "was a novelist and playwright"),
    "Gabriel Garcia Marquez": (
        "Garcia Marquez",
        1927,
        "Aracataca",
        "",
        "Colombia",
        "was a novelist and Nobel laureate associated with magical realism",
    ),
    "Victor Hugo": ("Hugo", 1802, "Besancon", "", "France", "was a poet and novelist of the Romantic movement"),
    "Franz Kafka": (
        "Kafka",
        1883,
        "Prague",
        "",
        "Czech Republic",
        "was a writer who wrote the novella The Metamorphosis",
    ),
    "Hans Christian Andersen": ("Andersen", 1805, "Odense", "", "Denmark", "was a writer of fairy tales"),
    "Henrik Ibsen": ("Ibsen", 1828, "Skien", "", "Norway", "was a playwright often called the father of realism"),
    "Astrid Lindgren": ("Lindgren", 1907, "Vimmerby", "", "Sweden", "was a writer of children's books"),
    "Haruki Murakami": ("Murakami", 1949, "Kyoto", "", "Japan", "is a novelist"),
    "Rabindranath Tagore": (
        "Tagore",
        1861,
        "Calcutta",
        "",
        "India",
        "was a poet who in 1913 became the first non-European to win the Nobel Prize in Literature",
    ),
    "Chinua Achebe": ("Achebe", 1930, "Ogidi", "", "Nigeria", "was a novelist and poet"),
    "Mark Twain": (
        "Twain",
        1835,
        "Florida, Missouri",
        "",
        "United States",
        "was a writer and humorist whose real name was Samuel Clemens",
    ),
    "Ernest Hemingway": (
        "Hemingway",
        1899,
        "Oak Park, Illinois",
        "",
        "United States",
        "was a novelist who won the Nobel Prize in Literature in 1954",
    ),
    "Alexander Graham Bell": (
        "Bell",
        1847,
        "Edinburgh",
        "Scotland",
        "United Kingdom",
        "was an inventor who was awarded the first United States patent for the telephone in 1876",
    ),
    "Thomas Edison": (
        "Edison",
        1847,
        "Milan, Ohio",
        "",
        "United States",
        "was an inventor who developed the phonograph and a practical electric light bulb",
    ),
    "Guglielmo Marconi": (
        "Marconi",
        1874,
        "Bologna",
        "",
        "Italy",
        "was an inventor and electrical engineer known for long-distance radio transmission",
    ),
    "Johannes Gutenberg": (
        "Gutenberg",
        1400,
        "Mainz",
        "",
        "Germany",
        "was a goldsmith and inventor who introduced printing with movable type to Europe",
    ),
    "Alexander Fleming": (
        "Fleming",
        1881,
        "Darvel",
        "Scotland",
        "United Kingdom",
        "was a physician and microbiologist who discovered penicillin in 1928",
    ),
    "Louis Pasteur": (
        "Pasteur",
        1822,
        "Dole",
        "",
        "France",
        "was a chemist and microbiologist known for the process of pasteurization and for vaccines "
        "against rabies and anthrax",
    ),
    "Gregor Mendel": (
        "Mendel",
        1822,
        "Hyncice",
        "",
        "Czech Republic",
        "was a friar and scientist who founded the modern science of genetics through experiments on pea plants",
    ),
    "Dmitri Mendeleev": (
        "Mendeleev",
        1834,
        "Tobolsk",
        "",
        "Russia",
        "was a chemist who formulated the periodic table of the elements in 1869",
    ),
    "Nicolaus Copernicus": (
        "Copernicus",
        1473,
        "Torun",
        "",
        "Poland",
        "was an astronomer who proposed a model of the universe with the Sun at its centre",
    ),
    "Johannes Kepler": (
        "Kepler",
        1571,
        "Weil der Stadt",
        "",
        "Germany",
        "was an astronomer who discovered the laws of planetary motion",
    ),
    "William Herschel": (
        "Herschel",
        1738,
        "Hanover",
        "",
        "Germany",
        "was an astronomer and composer who discovered the planet Uranus in 1781",
    ),
    "Niels Bohr": (
        "Bohr",
        1885,
        "Copenhagen",
        "",
        "Denmark",
        "was a physicist who made foundational contributions to the structure of the atom",
    ),
    "Alan Turing": (
        "Turing",
        1912,
        "London",
        "England",
        "United Kingdom",
        "was a mathematician and computer scientist who formalised the concept of computation",
    ),
    "Tim Berners-Lee": (
        "Berners-Lee",
        1955,
        "London",
        "England",
        "United Kingdom",
        "is a computer scientist who invented the World Wide Web in 1989 while working at CERN",
    ),
    "Alfred Nobel": (
        "Nobel",
        1833,
        "Stockholm",
        "",
        "Sweden",
        "was a chemist and engineer who invented dynamite and funded the Nobel Prizes",
    ),
    "Srinivasa Ramanujan": (
        "Ramanujan",
        1887,
        "Erode",
        "",
        "India",
        "was a mathematician who made contributions to number theory and infinite series",
    ),
    "Carl Friedrich Gauss": ("Gauss", 1777, "Brunswick", "", "Germany", "was a mathematician and physicist"),
    "Leonhard Euler": (
        "Euler",
        1707,
        "Basel",
        "",
        "Switzerland",
        "was a mathematician who introduced much of modern mathematical notation",
    ),
    "Sigmund Freud": ("Freud", 1856, "Pribor", "", "Czech Republic", "was a neurologist who founded psychoanalysis"),
    "Karl Benz": (
        "Benz",
        1844,
        "Karlsruhe",
        "",
        "Germany",
        "was an engineer who built the Benz Patent-Motorwagen, widely regarded as the first practical "
        "automobile, in 1885",
    ),
    "Orville Wright": (
        "Orville Wright",
        1871,
        "Dayton, Ohio",
        "",
        "United States",
        "was an aviation pioneer who, with his brother Wilbur, made the first controlled powered "
        "aeroplane flight in 1903 near Kitty Hawk, North Carolina",
    ),
    "Mahatma Gandhi": (
        "Gandhi",
        1869,
        "Porbandar",
        "",
        "India",
        "was a lawyer who led India's nonviolent campaign for independence from British rule",
    ),
    "Nelson Mandela": (
        "Mandela",
        1918,
        "Mvezo",
        "",
        "South Africa",
        "was an anti-apartheid activist who became the first Black president of South Africa in 1994",
    ),
    "Napoleon Bonaparte": (
        "Napoleon",
        1769,
        "Ajaccio",
        "Corsica",
        "France",
        "was a military commander who became Emperor of the French in 1804",
    ),
    "Confucius": ("Confucius", -551, "Qufu", "", "China", "was a philosopher and teacher"),
    "Jose Rizal": (
        "Rizal",
        1861,
        "Calamba",
        "",
        "Philippines",
        "was a writer and nationalist, regarded as the national hero of the Philippines",
    ),
    "Antoni Gaudi": (
        "Gaudi",
        1852,
        "Reus",
        "",
        "Spain",
        "was an architect whose best-known work is the Sagrada Familia basilica in Barcelona",
    ),
    "Gustave Eiffel": (
        "Eiffel",
        1832,
        "Dijon",
        "",
        "France",
        "was a civil engineer whose company designed and built the Eiffel Tower",
    ),
    "Edvard Munch": ("Munch", 1863, "Loten", "", "Norway", "was a painter of the Expressionist movement"),
    "Jean Sibelius": ("Sibelius", 1865, "Hameenlinna", "", "Finland", "was a composer of the late Romantic period"),
    "Antonin Dvorak": (
        "Dvorak",
        1841,
        "Nelahozeves",
        "",
        "Czech Republic",
        "was a composer who used folk music of Moravia and Bohemia",
    ),
    "Giuseppe Verdi": ("Verdi", 1813, "Le Roncole", "", "Italy", "was a composer known for his operas"),
    "Pyotr Ilyich Tchaikovsky": (
        "Tchaikovsky",
        1840,
        "Votkinsk",
        "",
        "Russia",
        "was a composer of the Romantic period",
    ),
    "Omar Khayyam": ("Khayyam", 1048, "Nishapur", "", "Iran", "was a mathematician, astronomer and poet"),
    "Pele": ("Pele", 1940, "Tres Coracoes", "", "Brazil", "was a footballer who won three FIFA World Cups with Brazil"),
    "Diego Maradona": (
        "Maradona",
        1960,
        "Lanus",
        "",
        "Argentina",
        "was a footballer who captained Argentina to victory at the 1986 FIFA World Cup",
    ),
    "Usain Bolt": (
        "Bolt",
        1986,
        "Sherwood Content",
        "",
        "Jamaica",
        "is a sprinter who holds the world records in the 100 metres and 200 metres",
    ),
    "Roger Federer": (
        "Federer",
        1981,
        "Basel",
        "",
        "Switzerland",
        "is a tennis player who won 20 Grand Slam singles titles",
    ),
    "Shakira": ("Shakira", 1977, "Barranquilla", "", "Colombia", "is a singer and songwriter"),
    "Wangari Maathai": (
        "Maathai",
        1940,
        "Ihithe",
        "",
        "Kenya",
        "was an environmental activist who founded the Green Belt Movement and won the Nobel Peace Prize in 2004",
    ),
    "Kofi Annan": (
        "Annan",
        1938,
        "Kumasi",
        "",
        "Ghana",
        "was a diplomat who served as the seventh Secretary-General of the United Nations",
    ),
    "Ibn Battuta": (
        "Ibn Battuta",
        1304,
        "Tangier",
        "",
        "Morocco",
        "was a scholar and explorer who travelled across Africa, Asia and Europe",
    ),
    "Sun Yat-sen": (
        "Sun Yat-sen",
        1866,
        "Cuiheng",
        "",
        "China",
        "was a revolutionary and the first provisional president of the Republic of China",
    ),
    "Salvador Dali": ("Dali", 1904, "Figueres", "", "Spain", "was a Surrealist painter"),
    "Edmund Hillary": (
        "Hillary",
        1919,
        "Auckland",
        "",
        "New Zealand",
        "was a mountaineer who, with Tenzing Norgay, made the first confirmed ascent of Mount Everest in 1953",
    ),
}

# work: (creator, kind, year, extra sentence)
WORKS: dict[str, tuple[str, str, int, str]] = {
    "Pride and Prejudice": ("Jane Austen", "novel", 1813, "It follows Elizabeth Bennet and Mr Darcy."),
    "Oliver Twist": ("Charles Dickens", "novel", 1838, "It tells the story of an orphan in London."),
    "War and Peace": ("Leo Tolstoy", "novel", 1869, "It is set during the Napoleonic Wars."),
    "Crime and Punishment": ("Fyodor Dostoevsky", "novel", 1866, "Its main character is Rodion Raskolnikov."),
    "Don Quixote": ("Miguel de Cervantes", "novel", 1605, "Its first part appeared in 1605 and its second in 1615."),
    "One Hundred Years of Solitude": (
        "Gabriel Garcia Marquez",
        "novel",
        1967,
        "It follows the Buendia family in the town of Macondo.",
    ),
    "Les Miserables": ("Victor Hugo", "novel", 1862, "Its main character is the former convict Jean Valjean."),
    "The Metamorphosis": ("Franz Kafka", "novella", 1915, "Gregor Samsa wakes up transformed into an insect."),
    "A Doll's House": ("Henrik Ibsen", "play", 1879, "Its main character is Nora Helmer."),
    "Pippi Longstocking": (
        "Astrid Lindgren",
        "children's book",
        1945,
        "Pippi is an unusually strong girl who lives with a horse and a monkey.",
    ),
    "Things Fall Apart": ("Chinua Achebe", "novel", 1958, "Its main character is Okonkwo."),
    "Adventures of Huckleberry Finn": ("Mark Twain", "novel", 1884, "Huck travels down the Mississippi River."),
    "The Old Man and the Sea": (
        "Ernest Hemingway",
        "novella",
        1952,
        "It tells of a Cuban fisherman's struggle with a giant marlin.",
    ),
    "Hamlet": ("William Shakespeare", "tragedy", 1600, "It is set in Denmark."),
    "Romeo and Juliet": ("William Shakespeare", "tragedy", 1597, "It is set in Verona."),
    "Gitanjali": ("Rabindranath Tagore", "collection of poems", 1910, "Its English version appeared in 1912."),
    "Norwegian Wood": ("Haruki Murakami", "novel", 1987, "It is set in Tokyo in the late 1960s."),
    "The Little Mermaid": (
        "Hans Christian Andersen",
        "fairy tale",
        1837,
        "A statue of the little mermaid stands in the harbour of Copenhagen.",
    ),
    "On the Origin of Species": (
        "Charles Darwin",
        "book",
        1859,
        "It introduced the theory of evolution by natural selection.",
    ),
    "Mona Lisa": ("Leonardo da Vinci", "painting", 1503, "It hangs in the Louvre museum in Paris."),
    "The Starry Night": (
        "Vincent van Gogh",
        "painting",
        1889,
        "It is held by the Museum of Modern Art in New York City.",
    ),
    "Guernica": (
        "Pablo Picasso",
        "painting",
        1937,
        "It depicts the bombing of the town of Guernica during the Spanish Civil War.",
    ),
    "The Scream": ("Edvard Munch", "painting", 1893, "It shows a figure with an agonised face against a red sky."),
    "The Persistence of Memory": ("Salvador Dali", "painting", 1931, "It shows melting pocket watches."),
    "Swan Lake": ("Pyotr Ilyich Tchaikovsky", "ballet", 1877, "It premiered at the Bolshoi Theatre in Moscow."),
    "Aida": ("Giuseppe Verdi", "opera", 1871, "It is set in ancient Egypt and premiered in Cairo."),
    "Symphony No. 9 From the New World": (
        "Antonin Dvorak",
        "symphony",
        1893,
        "It was written while its composer lived in the United States.",
    ),
    "Finlandia": ("Jean Sibelius", "symphonic poem", 1900, "It became a symbol of Finnish national identity."),
    "The Magic Flute": ("Wolfgang Amadeus Mozart", "opera", 1791, "It premiered in Vienna."),
    "Fur Elise": ("Ludwig van Beethoven", "piano piece", 1810, "It is one of the most popular piano pieces."),
    "Brandenburg Concertos": (
        "Johann Sebastian Bach",
        "set of concertos",
        1721,
        "They were dedicated to the Margrave of Brandenburg.",
    ),
    "Sagrada Familia": ("Antoni Gaudi", "basilica", 1882, "Its construction began in 1882 in Barcelona."),
}

# invention or discovery: (person, year, sentence)
INVENTIONS: dict[str, tuple[str, int, str]] = {
    "telephone": ("Alexander Graham Bell", 1876, "The telephone turns sound into electrical signals and back."),
    "phonograph": ("Thomas Edison", 1877, "The phonograph recorded and played back sound."),
    "radio": ("Guglielmo Marconi", 1895, "Radio communication sends signals with electromagnetic waves."),
    "printing press": ("Johannes Gutenberg", 1440, "Printing with movable metal type spread quickly in Europe."),
    "penicillin": ("Alexander Fleming", 1928, "Penicillin was the first widely used antibiotic."),
    "dynamite": ("Alfred Nobel", 1867, "Dynamite is an explosive made with nitroglycerin."),
    "periodic table": ("Dmitri Mendeleev", 1869, "The periodic table arranges the chemical elements."),
    "World Wide Web": ("Tim Berners-Lee", 1989, "The World Wide Web links documents over the Internet."),
    "automobile": ("Karl Benz", 1885, "The Benz Patent-Motorwagen had a petrol engine and three wheels."),
    "aeroplane": (
        "Orville Wright",
        1903,
        "Orville and Wilbur Wright's Wright Flyer made the first controlled powered flight.",
    ),
}

# element: (symbol, atomic number, sentence)
ELEMENTS: dict[str, tuple[str, int, str]] = {
    "Hydrogen": ("H", 1, "It is the lightest and most abundant element in the universe."),
    "Helium": ("He", 2, "It is a noble gas used to fill balloons."),
    "Lithium": ("Li", 3, "It is used in rechargeable batteries."),
    "Carbon": ("C", 6, "It is the basis of organic chemistry; diamond and graphite are forms of it."),
    "Nitrogen": ("N", 7, "It makes up about 78 percent of Earth's atmosphere."),
    "Oxygen": ("O", 8, "It makes up about 21 percent of Earth's atmosphere."),
    "Fluorine": ("F", 9, "It is the most electronegative element."),
    "Neon": ("Ne", 10, "It glows red-orange in neon signs."),
    "Sodium": ("Na", 11, "Its symbol comes from the Latin name natrium."),
    "Magnesium": ("Mg", 12, "It burns with a bright white flame."),
    "Aluminium": ("Al", 13, "It is the most abundant metal in Earth's crust."),
    "Silicon": ("Si", 14, "It is used to make computer chips."),
    "Phosphorus": ("P", 15, "It was discovered by Hennig Brand in 1669."),
    "Sulfur": ("S", 16, "It is a yellow nonmetal."),
    "Chlorine": ("Cl", 17, "It is used to disinfect drinking water."),
    "Argon": ("Ar", 18, "It is the most common noble gas in Earth's atmosphere."),
    "Potassium": ("K", 19, "Its symbol comes from the Latin name kalium."),
    "Calcium": ("Ca", 20, "It is a major part of bones and teeth."),
    "Titanium": ("Ti", 22, "It is strong, light and resistant to corrosion."),
    "Iron": ("Fe", 26, "Its symbol comes from the Latin name ferrum; steel is mostly made of it."),
    "Nickel": ("Ni", 28, "It is used in stainless steel and coins."),
    "Copper": ("Cu", 29, "Its symbol comes from the Latin name cuprum; it is used in electrical wiring."),
    "Zinc": ("Zn", 30, "It is used to galvanise steel."),
    "Silver": ("Ag", 47, "Its symbol comes from the Latin name argentum."),
    "Tin": ("Sn", 50, "Its symbol comes from the Latin name stannum."),
    "Iodine": ("I", 53, "It is needed by the thyroid gland."),
    "Gold": ("Au", 79, "Its symbol comes from the Latin name aurum."),
    "Mercury": ("Hg", 80, "It is the only metal that is liquid at room temperature."),
    "Lead": ("Pb", 82, "Its symbol comes from the Latin name plumbum."),
    "Polonium": ("Po", 84, "It was discovered in 1898 by Marie and Pierre Curie."),
    "Radium": ("Ra", 88, "It was discovered in 1898 by Marie and Pierre Curie."),
    "Uranium": ("U", 92, "It is used as fuel in nuclear power plants."),
}

PLANETS: dict[str, tuple[str, str]] = {
    "Mercury": ("first", "It is the smallest planet and the closest to the Sun."),
    "Venus": ("second", "It is the hottest planet because of its thick carbon dioxide atmosphere."),
    "Earth": ("third", "It is the only planet known to support life."),
    "Mars": ("fourth", "It is called the Red Planet and has the volcano Olympus Mons."),
    "Jupiter": ("fifth", "It is the largest planet and has a storm called the Great Red Spot."),
    "Saturn": ("sixth", "It is known for its ring system; its largest moon is Titan."),
    "Uranus": ("seventh", "It rotates on its side and was discovered by William Herschel in 1781."),
    "Neptune": ("eighth", "It was discovered in 1846 after its position was predicted mathematically."),
}

# (title, text): rivers, mountains and other places
GEOGRAPHY: list[tuple[str, str]] = [
    (
        "Nile",
        "The Nile is a major river in northeastern Africa. It flows north through Egypt and empties into the "
        "Mediterranean Sea. It is often called the longest river in the world.",
    ),
    (
        "Amazon River",
        "The Amazon River in South America flows mostly through Brazil and empties into the Atlantic "
        "Ocean. It carries more water than any other river.",
    ),
    (
        "Danube",
        "The Danube is the second-longest river in Europe. It rises in the Black Forest in Germany and flows "
        "through Vienna, Bratislava, Budapest and Belgrade before emptying into the Black Sea.",
    ),
    ("Rhine", "The Rhine rises in the Swiss Alps and flows through Germany and the Netherlands into the North Sea."),
    ("Thames", "The Thames is a river in southern England that flows through London into the North Sea."),
    ("Seine", "The Seine is a river in northern France that flows through Paris into the English Channel."),
    (
        "Yangtze",
        "The Yangtze is the longest river in Asia. It flows through China into the East China Sea near Shanghai.",
    ),
    (
        "Ganges",
        "The Ganges is a sacred river in Hinduism that flows through India and Bangladesh into the Bay of Bengal.",
    ),
    (
        "Mississippi River",
        "The Mississippi River flows south through the United States and empties into the Gulf of Mexico.",
    ),
    ("Volga", "The Volga is the longest river in Europe. It flows through Russia into the Caspian Sea."),
    ("Tiber", "The Tiber is a river in Italy that flows through Rome into the Tyrrhenian Sea."),
    ("Vltava", "The Vltava is the longest river in the Czech Republic and flows through Prague."),
    (
        "Mount Everest",
        "Mount Everest is the highest mountain above sea level, at 8,849 metres. It lies in the "
        "Himalayas on the border between Nepal and China. Edmund Hillary and Tenzing Norgay made the "
        "first confirmed ascent in 1953.",
    ),
    ("K2", "K2 is the second-highest mountain on Earth, at 8,611 metres, on the border between Pakistan and China."),
    ("Mont Blanc", "Mont Blanc is the highest mountain in the Alps, on the border between France and Italy."),
    ("Mount Kilimanjaro", "Mount Kilimanjaro is a dormant volcano in Tanzania and the highest mountain in Africa."),
    ("Aconcagua", "Aconcagua, in the Andes of Argentina, is the highest mountain in the Americas."),
    ("Mount Fuji", "Mount Fuji is an active volcano and the highest mountain in Japan."),
    ("Sahara", "The Sahara is the largest hot desert in the world and covers much of North Africa."),
    ("Lake Baikal", "Lake Baikal in Siberia, Russia, is the deepest lake in the world."),
    (
        "Great Barrier Reef",
        "The Great Barrier Reef, off the coast of Queensland in Australia, is the world's largest coral reef system.",
    ),
    ("Pacific Ocean", "The Pacific Ocean is the largest and deepest ocean; the Mariana Trench is its deepest point."),
]

# birth towns that are not capitals, with a line of their own (distractors for the multi-hop questions)
TOWNS: dict[str, str] = {
    "Ulm": "Ulm is a city on the Danube in the German state of Baden-Wurttemberg, known for its tall minster.",
    "Salzburg": "Salzburg is a city in western Austria near the German border, known for its baroque old town.",
    "Bonn": "Bonn is a city on the Rhine in Germany; it was the seat of government of West Germany.",
    "Pisa": "Pisa is a city in Tuscany, Italy, famous for its leaning tower.",
    "Malaga": "Malaga is a port city on the Costa del Sol in Andalusia, southern Spain.",
    "Edinburgh": "Edinburgh is the capital city of Scotland, known for its castle.",
    "Kyoto": "Kyoto was the imperial capital of Japan for more than a thousand years and has many temples.",
    "Calcutta": "Calcutta, now officially Kolkata, is a large city in eastern India on the Hooghly River.",
    "Basel": "Basel is a city on the Rhine in Switzerland, near the borders with France and Germany.",
    "Bologna": "Bologna is a city in northern Italy with one of the oldest universities in the world.",
    "Mainz": "Mainz is a city on the Rhine in Germany.",
    "Hanover": "Hanover is a city in northern Germany and the capital of the state of Lower Saxony.",
    "Auckland": "Auckland is the largest city in New Zealand, on the North Island.",
    "Barranquilla": "Barranquilla is a port city on the Caribbean coast of Colombia.",
    "Kumasi": "Kumasi is a city in Ghana and the historic capital of the Ashanti Empire.",
    "Tangier": "Tangier is a city in northern Morocco on the Strait of Gibraltar.",
    "Odense": "Odense is the third-largest city in Denmark, on the island of Funen.",
    "Reus": "Reus is a city in Catalonia, Spain.",
    "Dijon": "Dijon is a city in eastern France, known for its mustard.",
    "Porbandar": "Porbandar is a coastal city in the state of Gujarat in western India.",
}


# birth years that are approximate or calendar-dependent: stated in the passage but never asked
UNCERTAIN_YEARS = {"Johannes Gutenberg": "around 1400", "Isaac Newton": "1643 (1642 in the Julian calendar)"}


def _person_passage(name: str) -> str:
    short, year, place, region, country, what = PEOPLE[name]
    where = ", ".join(p for p in (place, region, country) if p)
    born = UNCERTAIN_YEARS.get(name) or (f"{-year} BC" if year < 0 else str(year))
    return f"{name} {what}. {short} was born in {born} in {where}."


def _country_passage(country: str) -> str:
    capital, continent, currency, lang = COUNTRIES[country]
    text = f"{country} is a country in {continent}. Its capital is {capital}. Its currency is the {currency}."
    if lang:
        text += f" The official language{'s are' if ' and ' in lang else ' is'} {lang}."
    return text


def build() -> tuple[list[dict], list[dict]]:
    """(passages, questions) with questions pointing at the passages that support them."""
    docs: list[dict] = []

    def add(title: str, text: str) -> str:
        doc_id = str(len(docs))
        docs.append({"id": doc_id, "title": title, "text": text})
        return doc_id

    country_doc = {c: add(c, _country_passage(c)) for c in COUNTRIES}
    person_doc = {p: add(p, _person_passage(p)) for p in PEOPLE}
    work_doc = {}
    for work, (creator, kind, year, extra) in WORKS.items():
        article = "an" if kind[0] in "aeiou" else "a"
        work_doc[work] = add(work, f"{work} is {article} {kind} by {creator}, dating from {year}. {extra}")
    invention_doc = {}
    for thing, (person, year, extra) in INVENTIONS.items():
        verb = {"penicillin": "discovered", "periodic table": "devised"}.get(thing, "invented")
        title = thing[0].upper() + thing[1:]
        invention_doc[thing] = add(title, f"The {thing} was {verb} by {person} in {year}. {extra}")
    element_doc = {
        e: add(e, f"{e} is a chemical element with the symbol {sym} and atomic number {z}. {extra}")
        for e, (sym, z, extra) in ELEMENTS.items()
    }
    planet_doc = {
        p: add(f"{p} (planet)", f"{p} is the {order} planet from the Sun. {extra}")
        for p, (order, extra) in PLANETS.items()
    }
    geo_doc = {title: add(title, text) for title, text in GEOGRAPHY}
    for town, text in TOWNS.items():
        add(town, text)

    questions: list[dict] = []

    def ask(question: str, answers: list[str], support: list[str], kind: str) -> None:
        answers = list(dict.fromkeys(answers))
        questions.append(
            {"id": f"q{len(questions)}", "question": question, "answers": answers, "support": support, "type": kind}
        )

    def country_answers(region: str, country: str) -> list[str]:
        alias = {"United Kingdom": ["UK", "Britain"], "United States": ["USA", "United States of America"]}
        return [country, *([region] if region else []), *alias.get(country, [])]

    for country, (capital, _, currency, _) in COUNTRIES.items():
        ask(f"What is the capital of {country}?", [capital], [country_doc[country]], "single")
        ask(f"What is the currency of {country}?", [currency], [country_doc[country]], "single")
    for name, (_, year, place, region, country, _) in PEOPLE.items():
        ask(f"In which country was {name} born?", country_answers(region, country), [person_doc[name]], "single")
        ask(f"Where was {name} born?", [place, place.split(",")[0]], [person_doc[name]], "single")
        if year > 0 and name not in UNCERTAIN_YEARS:
            ask(f"In what year was {name} born?", [str(year)], [person_doc[name]], "single")
        capital, _, currency, _ = COUNTRIES[country]
        support = [person_doc[name], country_doc[country]]
        if place != capital and region != "Scotland":  # Scotland's own capital would make the answer ambiguous
            ask(f"What is the capital of the country where {name} was born?", [capital], support, "multi")
        ask(f"What currency is used in the country where {name} was born?", [currency], support, "multi")
    verbs = {
        "painting": "painted",
        "opera": "composed",
        "ballet": "composed",
        "symphony": "composed",
        "symphonic poem": "composed",
        "piano piece": "composed",
        "set of concertos": "composed",
        "basilica": "designed",
    }
    for work, (creator, kind, _, _) in WORKS.items():
        verb = verbs.get(kind, "wrote")
        ask(f"Who {verb} {work}?", [creator, PEOPLE[creator][0]], [work_doc[work]], "single")
        _, _, place, region, country, _ = PEOPLE[creator]
        who = {"wrote": "author", "painted": "painter", "composed": "composer", "designed": "architect"}[verb]
        support = [work_doc[work], person_doc[creator]]
        ask(f"In which country was the {who} of {work} born?", country_answers(region, country), support, "multi")
        ask(f"In which city was the {who} of {work} born?", [place, place.split(",")[0]], support, "multi")
    for thing, (person, _, _) in INVENTIONS.items():
        ask(
            f"Who invented the {thing}?"
            if thing not in ("penicillin", "periodic table")
            else f"Who {'discovered' if thing == 'penicillin' else 'devised'} the {thing}?",
            [person, PEOPLE[person][0]],
            [invention_doc[thing]],
            "single",
        )
        _, _, place, region, country, _ = PEOPLE[person]
        capital = COUNTRIES[country][0]
        support = [invention_doc[thing], person_doc[person], country_doc[country]]
        if place != capital and region != "Scotland":
            ask(
                f"What is the capital of the country where the person credited with the {thing} was born?",
                [capital],
                support,
                "multi",
            )
    for element, (symbol, z, _) in ELEMENTS.items():
        ask(f"What is the chemical symbol of {element.lower()}?", [symbol], [element_doc[element]], "single")
        ask(f"What is the atomic number of {element.lower()}?", [str(z)], [element_doc[element]], "single")
    ask(
        "What is the chemical symbol of the element that Marie Curie named after her homeland?",
        ["Po"],
        [person_doc["Marie Curie"], element_doc["Polonium"]],
        "multi",
    )
    for planet, (order, _) in PLANETS.items():
        ask(f"Which planet is the {order} planet from the Sun?", [planet], [planet_doc[planet]], "single")
    ask(
        "In which country was the astronomer who discovered Uranus born?",
        ["Germany"],
        [planet_doc["Uranus"], person_doc["William Herschel"]],
        "multi",
    )
    ask(
        "Which river flows through the capital of Hungary?",
        ["Danube"],
        [country_doc["Hungary"], geo_doc["Danube"]],
        "multi",
    )
    ask("Which river flows through the capital of Italy?", ["Tiber"], [country_doc["Italy"], geo_doc["Tiber"]], "multi")
    ask(
        "Which river flows through the capital of the Czech Republic?",
        ["Vltava"],
        [country_doc["Czech Republic"], geo_doc["Vltava"]],
        "multi",
    )
    ask(
        "What is the capital of the country where Mount Kilimanjaro is located?",
        ["Dodoma"],
        [geo_doc["Mount Kilimanjaro"], country_doc["Tanzania"]],
        "multi",
    )
    ask(
        "What is the capital of the country where Aconcagua is located?",
        ["Buenos Aires"],
        [geo_doc["Aconcagua"], country_doc["Argentina"]],
        "multi",
    )
    ask("In which country is the highest mountain in Africa?", ["Tanzania"], [geo_doc["Mount Kilimanjaro"]], "single")
    ask("Into which sea does the Nile empty?", ["Mediterranean Sea", "Mediterranean"], [geo_doc["Nile"]], "single")
    ask("Which is the deepest lake in the world?", ["Lake Baikal", "Baikal"], [geo_doc["Lake Baikal"]], "single")
    ask("Into which sea does the Volga flow?", ["Caspian Sea", "Caspian"], [geo_doc["Volga"]], "single")
    return docs, questions


def drop_shortcut_multihop(docs: list[dict], questions: list[dict], topk: int = 3) -> list[dict]:
    """Removes multi-hop questions whose answer already appears in the BM25 top-``topk`` for the question
    itself, so every kept multi-hop question really needs a second search."""
    from rllib_llm.envs.search.retrievers import BM25Retriever
    from rllib_llm.envs.search.scoring import normalize_answer

    retriever = BM25Retriever(docs)
    kept = []
    for q in questions:
        if q["type"] == "multi":
            found = normalize_answer(" ".join(h["text"] for h in retriever.retrieve([q["question"]], topk)[0]))
            if any(f" {normalize_answer(a)} " in f" {found} " for a in q["answers"]):
                continue
        kept.append({**q, "id": f"q{len(kept)}"})
    return kept


def main() -> None:
    out = Path(__file__).resolve().parents[1] / "rllib_llm" / "envs" / "search" / "data"
    docs, questions = build()
    questions = drop_shortcut_multihop(docs, questions)
    with open(out / "corpus.jsonl", "w") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=True) + "\n")
    with open(out / "questions.jsonl", "w") as f:
        for q in questions:
            f.write(json.dumps(q, ensure_ascii=True) + "\n")
    print(
        f"{len(docs)} passages, {len(questions)} questions "
        f"({sum(q['type'] == 'multi' for q in questions)} multi-hop) written to {out}"
    )


if __name__ == "__main__":
    main()
